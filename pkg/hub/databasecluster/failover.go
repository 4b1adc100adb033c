package databasecluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Reasons of the FailoverInProgress condition.
const (
	ReasonWaitingForFencing      = "WaitingForFencing"
	ReasonWaitingForEviction     = "WaitingForEviction"
	ReasonManualFailoverRequired = "ManualFailoverRequired"
	ReasonPromoted               = "Promoted"
	ReasonFailoverComplete       = "FailoverComplete"
	ReasonRepromoted             = "RepromotedAfterFencing"
	ReasonDemoting               = "Demoting"
)

// demotion is a planned primary move in its first step: the old primary's share is written as a
// replica at the new epoch, and nothing is promoted until its agent confirms.
type demotion struct {
	cluster string
	epoch   int64
}

// demoted reports whether the cluster's agent has applied a replica role at epoch or later (it
// releases the primary Lease before it reports the epoch). No MemberDatabase: nothing to demote.
func demoted(mdb *dbfleetv1alpha1.MemberDatabase, epoch int64) bool {
	if mdb == nil {
		return true
	}
	return mdb.Spec.Role == dbfleetv1alpha1.RoleReplica && mdb.Spec.Epoch >= epoch &&
		mdb.Status.Epoch >= epoch && mdb.Status.ObservedGeneration >= mdb.Generation
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
// be applied now. It waits until the old primary's agent has certainly fenced itself: no renewal seen for its
// fenceAfter plus FencingMargin. With failover: Manual it waits for the user instead. It returns
// how long to wait (zero: go ahead), the FailoverInProgress reason and a message.
func (r *Reconciler) failoverGate(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster, old *dbfleetv1alpha1.MemberCluster, from string, now time.Time) (time.Duration, string, string) {
	if dbc.Spec.Primary != nil && dbc.Spec.Primary.Failover == dbfleetv1alpha1.FailoverManual {
		return time.Minute, ReasonManualFailoverRequired, fmt.Sprintf(
			"primary cluster %s is not ready and failover is Manual: set spec.primary.failover to Automatic to let the hub promote elsewhere", from)
	}
	fenceAfter := 15 * time.Second // the agent default, when the cluster never reported its own
	if old != nil && old.Status.Agent != nil && old.Status.Agent.FenceAfterSeconds > 0 {
		fenceAfter = time.Duration(old.Status.Agent.FenceAfterSeconds) * time.Second
	}
	need := fenceAfter + FencingMargin
	silent, known := time.Duration(0), false
	if r.Liveness != nil {
		var err error
		if silent, err = r.Liveness.ConfirmedSilentFor(ctx, from, need); err != nil {
			// Unconfirmed silence is no silence: the agent may still hold its primary.
			return time.Second, ReasonWaitingForFencing, fmt.Sprintf(
				"primary cluster %s is not ready; promoting elsewhere once its agent has certainly fenced, but its silence could not be confirmed: %v", from, err)
		}
		known = true
	}
	if !known {
		// Without the hub's own observations, count only the time the hub itself has been
		// waiting (the agent was already silent when it began). Status timestamps have second
		// precision and lastHeartbeat is written lazily, so both could only overstate the
		// silence: never trust them for this.
		if c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); c != nil &&
			c.Status == metav1.ConditionTrue && c.Reason == ReasonWaitingForFencing {
			silent = now.Sub(c.LastTransitionTime.Time) - time.Second
		}
	}
	if silent >= need {
		return 0, "", ""
	}
	return need - silent, ReasonWaitingForFencing, fmt.Sprintf(
		"primary cluster %s is not ready; promoting elsewhere once its agent has certainly fenced (no renewal for %s, seen silent for %s)",
		from, need, silent.Round(time.Second))
}

// setFailover sets the FailoverInProgress condition, reporting whether it changed.
func setFailover(dbc *dbfleetv1alpha1.DatabaseCluster, status metav1.ConditionStatus, reason, msg string) bool {
	return meta.SetStatusCondition(&dbc.Status.Conditions, metav1.Condition{
		Type: dbfleetv1alpha1.ConditionFailoverInProgress, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: dbc.Generation,
	})
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
	if mdb == nil || !clusterReady(mc) {
		return false
	}
	if !meta.IsStatusConditionTrue(mdb.Status.Conditions, dbfleetv1alpha1.ConditionFenced) || mdb.Status.Epoch != p.Epoch || mdb.Spec.Epoch != p.Epoch {
		return false
	}
	since := metav1.NewTime(now)
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: p.Cluster, Epoch: p.Epoch + 1, Since: &since}
	promotions.Inc()
	r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, ReasonRepromoted, "Promote",
		"primary on %s fenced itself at epoch %d while cut off; promoted again at epoch %d", p.Cluster, p.Epoch, p.Epoch+1)
	return true
}
