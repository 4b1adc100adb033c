package databasecluster

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// A planned switchover hands the old primary's final LSN to the target, which promotes only
// once it has replayed past it. Two things can leave the database without a primary there: a
// target that does not stream when the old primary stops never gets that WAL (once it is the
// primary pod it follows nobody), and a move off such a target would wait for a final LSN from
// an instance that never ran as primary. The functions here keep the first from starting and
// undo the second.

// SwitchoverReplayTimeout is how long a switchover's target may stay a standby, without the old
// primary's final LSN in the WAL it received, before the hub moves the primary off it again.
// Once the target is the primary pod nothing sends it more WAL, so past the few report rounds
// this allows for, it never gets there.
const SwitchoverReplayTimeout = 15 * time.Second

// instanceOf is pod's report in the share mdb, nil when it has none.
func instanceOf(mdb *dbfleetv1alpha1.MemberDatabase, pod string) *dbfleetv1alpha1.InstanceStatus {
	if mdb == nil {
		return nil
	}
	for i := range mdb.Status.Instances {
		if mdb.Status.Instances[i].Pod == pod {
			return &mdb.Status.Instances[i]
		}
	}
	return nil
}

// runsPrimary reports whether pod's instance in the share says it runs as primary: a planned
// move off it stops a primary that takes writes.
func runsPrimary(mdb *dbfleetv1alpha1.MemberDatabase, pod string) bool {
	in := instanceOf(mdb, pod)
	return in != nil && in.Role == dbfleetv1alpha1.InstanceRunningPrimary
}

// demoting reports whether the share mdb was already written as a replica at epoch or later:
// the demotion has begun and goes on, whatever the target does now.
func demoting(mdb *dbfleetv1alpha1.MemberDatabase, epoch int64) bool {
	return mdb != nil && mdb.Spec.Role == dbfleetv1alpha1.RoleReplica && mdb.Spec.Epoch >= epoch
}

// switchoverNotYet says why a planned switchover from cluster from to pod in cluster to must not
// begin yet, or "" when it may, and when to look again. It is asked only of a move the primary's
// cluster does not force (NoPrimary) and that has not begun (demoting).
//   - A primary promoted by the last move is left SwitchoverReplayTimeout to become ready:
//     moving off it at once could hand the token it was given to a target that cannot reach it
//     either, back and forth. Past that, a person may still move it.
//   - A running primary is stopped only for a target that streams from it.
func switchoverNotYet(s *scope, from, to, pod string, now time.Time) (string, time.Duration) {
	p := s.dbc.Status.Primary
	if c := meta.FindStatusCondition(s.dbc.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == dbfleetv1alpha1.ReasonPromoted && p.Since != nil {
		if wait := p.Since.Add(SwitchoverReplayTimeout).Sub(now); wait > 0 {
			return fmt.Sprintf("the switchover to %s waits until the primary promoted on %s at epoch %d is ready (for up to %s)",
				to, from, p.Epoch, SwitchoverReplayTimeout), wait
		}
	}
	if !runsPrimary(s.memberDBs[from], p.Pod) {
		return "", 0
	}
	return switchoverTargetNotStreaming(s.memberDBs[to], to, pod), 0
}

// switchoverTargetNotStreaming says why a planned switchover to pod in the share mdb must not
// demote the running primary yet, or "" when it may: the target must be a standby that streams
// from it, or it will not receive the WAL up to the old primary's final LSN and cannot promote.
// A share without instance reports (no instance manager) has no WAL to wait for.
func switchoverTargetNotStreaming(mdb *dbfleetv1alpha1.MemberDatabase, to, pod string) string {
	if mdb == nil || len(mdb.Status.Instances) == 0 {
		return ""
	}
	in := instanceOf(mdb, pod)
	switch {
	case in == nil:
		return fmt.Sprintf("the switchover to %s waits for its instance %s to report", to, pod)
	case in.Role != dbfleetv1alpha1.InstanceRunningStandby || !in.Ready:
		msg := fmt.Sprintf("the switchover to %s waits until its instance %s streams from the primary (it reports role %s, ready %t", to, pod, in.Role, in.Ready)
		if in.Message != "" {
			msg += ": " + in.Message
		}
		return msg + "); the primary keeps taking writes meanwhile"
	}
	return ""
}

// stuckSwitchoverTarget says why the primary cannot stay on its cluster, or "" when it can: it
// was promoted by a planned switchover (status.primary.promoteAfterLSN), its instance acts on
// that role yet still runs as a standby, the WAL it holds ends before the LSN it must replay
// past, and SwitchoverReplayTimeout has passed since. The second return is when to look again
// while that time runs.
func stuckSwitchoverTarget(s *scope, now time.Time) (string, time.Duration) {
	p := s.dbc.Status.Primary
	if p == nil || p.PromoteAfterLSN == "" || p.Pod == "" || p.Since == nil {
		return "", 0
	}
	mdb := s.memberDBs[p.Cluster]
	in := instanceOf(mdb, p.Pod)
	if mdb == nil || mdb.Status.Epoch < p.Epoch || in == nil || in.Epoch < p.Epoch ||
		in.Role != dbfleetv1alpha1.InstanceRunningStandby || in.PromotedEpoch >= p.Epoch {
		return "", 0
	}
	token, err := contract.ParseLSN(p.PromoteAfterLSN)
	if err != nil {
		return "", 0
	}
	progress, ok := instanceProgress(mdb, p.Pod)
	if ok && progress.Received >= uint64(token) {
		return "", 0 // it has the WAL and only replays it
	}
	if wait := p.Since.Add(SwitchoverReplayTimeout).Sub(now); wait > 0 {
		return "", wait
	}
	held := "no WAL"
	if ok {
		held = fmt.Sprintf("WAL up to %s", in.ReceivedLSN)
		if in.ReceivedLSN == "" {
			held = fmt.Sprintf("WAL up to %s", in.ReplayedLSN)
		}
	}
	return fmt.Sprintf("its switchover target %s holds %s, short of the final LSN %s it must replay past, %s after it was chosen; nothing sends it more",
		p.Pod, held, p.PromoteAfterLSN, SwitchoverReplayTimeout), 0
}

// unpromotedToken is the promotion token for a planned move off a primary that never ran as
// one: a switchover's target (status.primary.promoteAfterLSN set) whose instances report, from
// the share at next or later, that they act on that epoch or a later one and were never promoted
// at the primary's epoch. It took no write, so the WAL still ends at the LSN it was handed,
// which the old primary holds. The second return says whether that is so; without proof (an
// instance that does not report its epochs, or one promoted at that epoch, whose final LSN then
// counts) it is false.
func unpromotedToken(mdb *dbfleetv1alpha1.MemberDatabase, p *dbfleetv1alpha1.PrimaryStatus, next int64) (string, bool) {
	if p == nil || p.PromoteAfterLSN == "" || mdb == nil || mdb.Status.Epoch < next || len(mdb.Status.Instances) == 0 {
		return "", false
	}
	primaryReported := p.Pod == ""
	for _, in := range mdb.Status.Instances {
		if in.PromotedEpoch >= p.Epoch || in.Role == dbfleetv1alpha1.InstanceRunningPrimary {
			return "", false
		}
		if p.Pod == "" || in.Pod == p.Pod {
			if in.Epoch < next {
				return "", false
			}
			primaryReported = true
		}
	}
	if !primaryReported {
		return "", false
	}
	return p.PromoteAfterLSN, true
}
