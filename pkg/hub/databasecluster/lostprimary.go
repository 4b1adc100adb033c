package databasecluster

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// A lost primary pod (docs/failover.md, "A lost primary pod"): the primary's instance stopped
// serving inside a member cluster whose agent is healthy (its node died, its postgres
// crash-loops, its volume failed). The agent counts it lost after its --primary-lost-after,
// renews its primary Lease no more, and fences the share once the Lease has certainly run out
// (Fenced=True, PrimaryLost): the old primary has stopped taking writes, but for its failsafe,
// which the silence gate covers. The hub then promotes the most advanced eligible standby:
//
//   - in the same share, when it has one at least as far in the WAL as any other cluster's
//     (replaceLostPrimaryPod: the same cluster at the next epoch, another pod);
//   - else in another cluster, by scheduling's usual order (the lost primary's cluster is listed
//     in NoPrimary, and the move takes a failover's steps: the Lease has run out, so fencedFirst
//     passes at once; synchronousFirst; silentFirst);
//   - with no eligible standby anywhere, the same pod again (repromoteFencedPrimary), should it
//     come back.

// ReasonPrimaryPodReplaced is the Event raised when the hub promotes another pod of the primary's
// own share over a lost primary pod.
const ReasonPrimaryPodReplaced = "PrimaryPodReplaced"

// primaryLost says the share, the primary's, reports its primary pod lost and its Lease run out at
// the primary's epoch (Fenced=True, PrimaryLost), applied at that epoch.
func (sh share) primaryLost(p *dbfleetv1alpha1.PrimaryStatus) bool {
	return sh.fencedFor(p, dbfleetv1alpha1.ReasonPrimaryLost)
}

// lostPrimaryPlan is where a lost primary goes: here is the best eligible standby of its own
// share (nil: none), elsewhere says a standby of another Ready cluster is further in the WAL (or
// the own share has none), so scheduling moves the primary off its cluster.
type lostPrimaryPlan struct {
	here      *instanceReading
	elsewhere bool
}

// planLostPrimary decides where a lost primary goes; ok is false when the primary is not lost.
// Eligible are standbys that run and reported a WAL position, with dataDurability required only
// those of the synchronous quorum.
func planLostPrimary(s *scope) (plan lostPrimaryPlan, ok bool) {
	p := s.dbc.Status.Primary
	if p == nil || p.Cluster == "" || !s.shareOn(p.Cluster).primaryLost(p) {
		return lostPrimaryPlan{}, false
	}
	eligible := func(sh share, pod string) bool {
		in := sh.instance(pod)
		return in != nil && in.Role == dbfleetv1alpha1.InstanceRunningStandby && pod != p.Pod
	}
	if required(s.dbc) {
		quorum, _ := quorumOf(s)
		inner := eligible
		eligible = func(sh share, pod string) bool { return inner(sh, pod) && slices.Contains(quorum, pod) }
	}
	var other *instanceReading
	for _, pl := range s.dbc.Status.Placements {
		if pl.Cluster != p.Cluster && !scheduling.ClusterReady(s.members[pl.Cluster]) {
			continue
		}
		sh := s.shareOn(pl.Cluster)
		readings := shareReadings(s.dbc.Name, pl.Cluster, pl.Ordinals.Start, pl.Ordinals.Count, sh.mdb, func(pod string) bool { return eligible(sh, pod) })
		k := choosePrimaryPod(readings, -1)
		if k < 0 || !readings[k].reported {
			continue
		}
		best := readings[k]
		if pl.Cluster == p.Cluster {
			plan.here = &best
		} else if other == nil || best.compare(*other) > 0 {
			other = &best
		}
	}
	plan.elsewhere = other != nil && (plan.here == nil || other.compare(*plan.here) > 0)
	return plan, true
}

// lostPrimaryElsewhere is why scheduling must move a lost primary off its cluster ("" when it
// need not): the NoPrimary entry of planLostPrimary's elsewhere.
func lostPrimaryElsewhere(s *scope) string {
	plan, ok := planLostPrimary(s)
	if !ok || !plan.elsewhere {
		return ""
	}
	p := s.dbc.Status.Primary
	return fmt.Sprintf("its primary pod %s was lost at epoch %d and a standby of another cluster is the most advanced", p.Pod, p.Epoch)
}

// replaceLostPrimaryPod promotes, at the next epoch, the most advanced eligible standby of a lost
// primary's own share, once it is silent (silenceGate) and, with dataDurability required, holds
// every acknowledged commit (synchronousGate); meanwhile it says why it holds. It returns when
// to look again while it holds (zero: it did not).
func (r *Reconciler) replaceLostPrimaryPod(s *scope, now time.Time) time.Duration {
	plan, ok := planLostPrimary(s)
	if !ok || plan.elsewhere || plan.here == nil || s.failover.heldReason != "" || s.demotion != nil {
		return 0
	}
	dbc := s.dbc
	p := dbc.Status.Primary
	to := plan.here
	if dbc.Spec.Primary != nil && dbc.Spec.Primary.Failover == dbfleetv1alpha1.FailoverManual {
		s.failover.hold(dbfleetv1alpha1.ReasonManualFailoverRequired, fmt.Sprintf(
			"the primary pod %s on %s was lost and failover is Manual: set spec.primary.failover to Automatic to let the hub promote %s", p.Pod, p.Cluster, to.pod))
		return time.Minute
	}
	if required(dbc) {
		if msg := synchronousGate(s, p.Cluster, to.pod); msg != "" {
			s.failover.hold(dbfleetv1alpha1.ReasonWaitingForSynchronousStandby, msg)
			return synchronousRecheck
		}
	}
	sh := s.shareOn(p.Cluster)
	if msg := silenceGate(sh, p, sh, p.Cluster, to.pod); msg != "" {
		s.failover.hold(dbfleetv1alpha1.ReasonWaitingForSilence, msg)
		return silenceRecheck
	}
	since := metav1.NewTime(now)
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: p.Cluster, Pod: to.pod, Epoch: p.Epoch + 1, Since: &since, Preferred: p.Preferred}
	promotions.Inc()
	s.failover.promoted = fmt.Sprintf("primary pod %s on %s was lost; promoted %s there at epoch %d (%s); waiting for it to be ready",
		p.Pod, p.Cluster, to.pod, p.Epoch+1, to)
	r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, ReasonPrimaryPodReplaced, "Promote",
		"primary pod %s on %s was lost at epoch %d; promoted %s, the most advanced eligible standby (%s), at epoch %d", p.Pod, p.Cluster, p.Epoch, to.pod, to, p.Epoch+1)
	return 0
}
