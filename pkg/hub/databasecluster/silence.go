package databasecluster

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// silenceRecheck is when a failover held for its target's silence is looked at again, should no
// report wake it first; the target's agent reports every few seconds while it waits.
const silenceRecheck = 5 * time.Second

// promotionSilenceSeconds is contract.PromotionSilence as the whole seconds the instances report,
// rounded up: a report of that many seconds is at least that long.
var promotionSilenceSeconds = int64(math.Ceil(contract.PromotionSilence.Seconds()))

// silentFirst holds a failover until the old primary has certainly stopped taking writes on its
// own account too: a primary whose Lease ran out goes on while it hears every standby of its
// membership (its failsafe), so the hub promotes only a member of that membership that reports
// it has exchanged nothing with any primary for contract.PromotionSilence. The standby's own
// instance checks the same again before it promotes (docs/failover.md, "Failsafe and promotion
// from silence").
func (m *primaryMove) silentFirst(s *scope) *hold {
	if msg := silenceGate(s.shareOn(m.from), m.current, s.shareOn(m.to), m.to, m.promoted.pod); msg != "" {
		return &hold{reason: dbfleetv1alpha1.ReasonWaitingForSilence, message: msg, wait: silenceRecheck}
	}
	return nil
}

// silenceGate says why pod (of the target share, on cluster to) may not be promoted over the
// old primary, or "" when it may.
func silenceGate(old share, current *dbfleetv1alpha1.PrimaryStatus, target share, to, pod string) string {
	if !target.reportsInstances() || current == nil {
		return "" // no instance manager: nothing takes writes past its Lease
	}
	if old.fencedAsPrimary(current) {
		return "" // it stopped at its epoch and takes no write again before a higher one
	}
	if members, reported := old.membership(current); reported && !slices.Contains(members, pod) {
		return fmt.Sprintf("%s/%s is not among the standbys the old primary %s last reported it answers to (%s): its silence would not prove the old primary stopped taking writes",
			to, pod, current.Pod, orNone(members))
	}
	in := target.instance(pod)
	switch {
	case in == nil:
		return fmt.Sprintf("waiting for %s/%s to report how long it has exchanged nothing with a primary", to, pod)
	case in.PrimarySilenceSeconds == nil:
		return fmt.Sprintf("%s/%s (role %s) reports no silence from the old primary", to, pod, in.Role)
	case *in.PrimarySilenceSeconds < promotionSilenceSeconds:
		// No count of seconds in the message: it would rewrite the condition, and raise an
		// Event, at every report.
		return fmt.Sprintf("%s/%s exchanged WAL with a primary less than %ds ago; it is promoted once silent that long, when the old primary %s has certainly stopped taking writes",
			to, pod, promotionSilenceSeconds, current.Pod)
	}
	return ""
}

// fencedAsPrimary says the primary's pod reports it fenced itself at the primary's epoch: it
// takes no write again until it is handed a higher one.
func (sh share) fencedAsPrimary(p *dbfleetv1alpha1.PrimaryStatus) bool {
	in := sh.instance(p.Pod)
	return in != nil && in.Role == dbfleetv1alpha1.InstanceFenced && in.PromotedEpoch == p.Epoch
}

// membership is whom the primary answers to for its failsafe, as it last reported running as
// primary at its epoch; reported is false when it never did (an instance manager from before
// the failsafe, which has none, or one cut off before its first report). The hub has no list of
// its own to put in its place: the one it writes into the primary's share is every other pod it
// places, which any target is.
func (sh share) membership(p *dbfleetv1alpha1.PrimaryStatus) (members []string, reported bool) {
	in := sh.instance(p.Pod)
	if in != nil && in.Role == dbfleetv1alpha1.InstanceRunningPrimary && in.Epoch >= p.Epoch && in.Failsafe != nil {
		return in.Failsafe.Members, true
	}
	return nil, false
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
