package databasecluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// ReasonRepromoted is the Event raised when a primary that fenced itself is promoted again.
const ReasonRepromoted = "RepromotedAfterFencing"

// demotion is a planned primary move in its first step: the old primary's share is written as a
// replica at the new epoch, and nothing is promoted until its agent confirms.
type demotion struct {
	cluster string
	epoch   int64
}

// failoverFacts is what one reconcile learnt about the primary's moves, for
// setFailoverInProgressCondition, the FailoverInProgress condition's only writer.
type failoverFacts struct {
	// heldReason and heldMessage, when set, say why a primary move scheduling decided is held
	// back (Demoting, WaitingForEviction, WaitingForFencing, ManualFailoverRequired,
	// EvictionRateLimited).
	heldReason, heldMessage string
	// promoted, when set, says that this reconcile moved the primary to another cluster.
	promoted string
	// pendingSwitchover, when set, says why the switchover spec.primary asks for cannot happen yet.
	pendingSwitchover string
}

func (f *failoverFacts) hold(reason, message string) {
	f.heldReason, f.heldMessage = reason, message
}

// FencingMargin is added to an agent's fenceAfter before the hub may promote away from it:
// room for the agent's clock rate and the time its fencing actions take.
const FencingMargin = 5 * time.Second

// Liveness tells how long the hub has not seen a cluster's agent renew, on the hub's own clock,
// a silence of at least over confirmed against the API server (liveness.Observer).
type Liveness interface {
	ConfirmedSilentFor(ctx context.Context, cluster string, over time.Duration) (time.Duration, error)
}

// failoverGate decides whether a failover (the primary moves off a cluster that is not Ready) may
// be applied now. It waits until the old primary's agent has certainly fenced itself: no renewal
// seen for its fenceAfter plus FencingMargin, on the hub's own clock and confirmed against the API
// server (Liveness). With failover: Manual it waits for the user instead. It returns how long to
// wait (zero: go ahead), the FailoverInProgress reason and a message.
func (r *Reconciler) failoverGate(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster, old *dbfleetv1alpha1.MemberCluster, oldShare share, from string) (time.Duration, string, string) {
	if dbc.Spec.Primary != nil && dbc.Spec.Primary.Failover == dbfleetv1alpha1.FailoverManual {
		return time.Minute, dbfleetv1alpha1.ReasonManualFailoverRequired, fmt.Sprintf(
			"primary cluster %s is not ready and failover is Manual: set spec.primary.failover to Automatic to let the hub promote elsewhere", from)
	}
	if oldShare.leaseLapsed(dbc.Status.Primary) {
		// The agent still heartbeats (its member API server is down, say), so there is no
		// silence to wait out; but it says its primary Lease ran out unrenewed at the current
		// epoch, so the primary has stopped taking writes and stays fenced at that epoch.
		return 0, "", ""
	}
	fenceAfter := 15 * time.Second // the agent default, when the cluster never reported its own
	if old != nil && old.Status.Agent != nil && old.Status.Agent.FenceAfterSeconds > 0 {
		fenceAfter = time.Duration(old.Status.Agent.FenceAfterSeconds) * time.Second
	}
	need := fenceAfter + FencingMargin
	silent, err := r.Liveness.ConfirmedSilentFor(ctx, from, need)
	if err != nil {
		// Unconfirmed silence is no silence: the agent may still hold its primary.
		return time.Second, dbfleetv1alpha1.ReasonWaitingForFencing, fmt.Sprintf(
			"primary cluster %s is not ready; promoting elsewhere once its agent has certainly fenced, but its silence could not be confirmed: %v", from, err)
	}
	if silent >= need {
		return 0, "", ""
	}
	// The message leaves out how long the agent has been silent so far: it would change the
	// condition, and write the status, on every look.
	return need - silent, dbfleetv1alpha1.ReasonWaitingForFencing, fmt.Sprintf(
		"primary cluster %s is not ready; promoting elsewhere once its agent has certainly fenced: no renewal seen for %s (its fenceAfter %s plus a margin of %s)",
		from, need, fenceAfter, FencingMargin)
}

// recordFailover raises the Events of a FailoverInProgress change (before is the condition as
// the reconcile found it) and, when a failover completed, observes how long it took.
func (r *Reconciler) recordFailover(dbc *dbfleetv1alpha1.DatabaseCluster, before *metav1.Condition) {
	after := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
	if after == nil || before != nil && before.Status == after.Status && before.Reason == after.Reason && before.Message == after.Message {
		return
	}
	switch after.Reason {
	case dbfleetv1alpha1.ReasonDemoting:
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, after.Reason, "Demote", "%s", after.Message)
	case dbfleetv1alpha1.ReasonWaitingForEviction, dbfleetv1alpha1.ReasonWaitingForFencing, dbfleetv1alpha1.ReasonManualFailoverRequired,
		dbfleetv1alpha1.ReasonWaitingForSynchronousStandby, dbfleetv1alpha1.ReasonWaitingForSilence:
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, after.Reason, "Failover", "%s", after.Message)
	case dbfleetv1alpha1.ReasonSwitchoverPending:
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, after.Reason, "Switchover", "%s", after.Message)
	case dbfleetv1alpha1.ReasonFailoverCanceled:
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, after.Reason, "Failover", "%s", after.Message)
	case dbfleetv1alpha1.ReasonFailoverComplete:
		if before != nil && before.Status == metav1.ConditionTrue && before.Reason == dbfleetv1alpha1.ReasonPromoted {
			failoverSeconds.Observe(r.Clock.Since(before.LastTransitionTime.Time).Seconds())
		}
	}
	// Promoted has its PrimaryChanged Event, EvictionRateLimited its EvictionDelayed one.
}

// recordFailsafe raises an Event when the primary turns to its failsafe or leaves it.
func (r *Reconciler) recordFailsafe(dbc *dbfleetv1alpha1.DatabaseCluster, before bool) {
	c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionPrimaryFailsafe)
	switch now := c != nil && c.Status == metav1.ConditionTrue; {
	case now && !before:
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, dbfleetv1alpha1.ReasonFailsafe, "Failsafe", "%s", c.Message)
	case !now && before:
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, dbfleetv1alpha1.ReasonLeaseHeld, "Failsafe", "%s", c.Message)
	}
}

// repromoteFencedPrimary hands a fresh epoch to a primary whose agent fenced it (it lost the hub
// for fenceAfter) while the hub kept it primary: once its cluster is Ready again, the agent stays
// fenced until it sees a higher epoch, so the hub gives it one. It returns whether it did.
func (r *Reconciler) repromoteFencedPrimary(s *scope, now time.Time) bool {
	dbc := s.dbc
	p := dbc.Status.Primary
	if p == nil || p.Cluster == "" {
		return false
	}
	mc, mdb := s.members[p.Cluster], s.memberDBs[p.Cluster]
	if mdb == nil || !scheduling.ClusterReady(mc) {
		return false
	}
	if !meta.IsStatusConditionTrue(mdb.Status.Conditions, dbfleetv1alpha1.ConditionFenced) || mdb.Status.Epoch != p.Epoch || mdb.Spec.Epoch != p.Epoch {
		return false
	}
	if s.demotion != nil || meta.IsStatusConditionTrue(mdb.Status.Conditions, dbfleetv1alpha1.ConditionClockSkew) {
		// It is being moved off (a planned move); and a cluster whose clocks disagree would
		// refuse its next Lease too: scheduling moves the primary off it instead.
		return false
	}
	if plan, lost := planLostPrimary(s); lost && (plan.here != nil || plan.elsewhere) {
		return false // its pod was lost: a standby takes over (lostprimary.go)
	}
	since := metav1.NewTime(now)
	// The same pod: its share's standbys only have WAL it sent them, so none is ahead of it.
	pod := primaryPod(dbc)
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: p.Cluster, Pod: pod, Epoch: p.Epoch + 1, Since: &since, Preferred: p.Preferred}
	promotions.Inc()
	r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, ReasonRepromoted, "Promote",
		"primary on %s (pod %s) fenced itself at epoch %d while cut off; promoted again at epoch %d, on the same pod: its share's standbys only have what it sent them",
		p.Cluster, pod, p.Epoch, p.Epoch+1)
	return true
}

// clockSkewed are the clusters whose share of the database reports ClockSkew (its instances'
// clocks disagree with the agent's, so a primary there refuses the Lease its agent renews), with
// the share's message: scheduling keeps the primary off them.
func clockSkewed(s *scope) map[string]string {
	var out map[string]string
	for cluster, mdb := range s.memberDBs {
		c := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionClockSkew)
		if c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[cluster] = c.Message
	}
	return out
}

// ReasonDemotionAbandoned is the Event raised when a planned move is dropped after the old
// primary was already told to step down, and that primary is promoted again.
const ReasonDemotionAbandoned = "DemotionAbandoned"

// repromoteAbandonedDemotion hands a fresh epoch to a primary whose demotion was written (its
// share at a higher epoch than status.primary's, as a replica) but whose move is no longer called
// for: the primary's cluster came back between its Ready condition and its taints, say. Writing
// the share back at the old epoch would be an epoch going backwards, which the agent never acts
// on: the demoted primary would stay a replica for good. It returns whether it did.
func (r *Reconciler) repromoteAbandonedDemotion(s *scope, now time.Time) bool {
	dbc := s.dbc
	p := dbc.Status.Primary
	if s.demotion != nil || s.failover.heldReason != "" || p == nil || p.Cluster == "" {
		return false // the move goes on
	}
	// On a cluster that is not Ready the move is a failover now: the share stays demoted.
	mdb := s.memberDBs[p.Cluster]
	if mdb == nil || mdb.Spec.Epoch <= p.Epoch || !scheduling.ClusterReady(s.members[p.Cluster]) {
		return false
	}
	since := metav1.NewTime(now)
	epoch := mdb.Spec.Epoch + 1
	// The same pod: nothing was promoted meanwhile, so its standbys only have what it sent them.
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: p.Cluster, Pod: primaryPod(dbc), Epoch: epoch, Since: &since, Preferred: p.Preferred}
	promotions.Inc()
	r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, ReasonDemotionAbandoned, "Promote",
		"the move off %s was dropped after its primary was told to step down at epoch %d; promoted again there at epoch %d",
		p.Cluster, mdb.Spec.Epoch, epoch)
	return true
}
