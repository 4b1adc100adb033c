package databasecluster

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Reasons of the aggregated conditions.
const (
	ReasonAllPropagated         = "AllPropagated"
	ReasonPropagationFailed     = "PropagationFailed"
	ReasonPrimaryReady          = "PrimaryReady"
	ReasonPrimaryNotReady       = "PrimaryNotReady"
	ReasonPrimaryUnknown        = "PrimaryClusterUnknown"
	ReasonNoQuorum              = "TooFewReplicasReady"
	ReasonNotScheduled          = "NotScheduled"
	ReasonRollingOut            = "RollingOut"
	ReasonUpToDate              = "UpToDate"
	ReasonSharesDegraded        = "SharesDegraded"
	ReasonSharesUnknown         = "SharesUnknown"
	ReasonHealthy               = "Healthy"
	ReasonNoFailover            = "NoFailover"
	ReasonWaitingForMemberClean = "WaitingForMemberCleanup"
	ReasonEvicting              = "EvictingShares"
)

// shareView is what the hub knows of one placed share.
type shareView struct {
	placement dbfleetv1alpha1.ClusterPlacement
	mdb       *dbfleetv1alpha1.MemberDatabase
	// reachable is false when the cluster's agent has gone silent (Ready is not True): then
	// nothing it last reported is trusted.
	reachable bool
	err       error
}

// clusterReady says whether the hub believes the cluster healthy (Ready=True), so that what its
// agent reports is trusted; a missing cluster is not.
func clusterReady(mc *dbfleetv1alpha1.MemberCluster) bool {
	return mc != nil && meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady)
}

// shareState judges one share from what its agent reported.
func shareState(v shareView) (dbfleetv1alpha1.PlacementState, int32) {
	switch {
	case !v.reachable:
		return dbfleetv1alpha1.PlacementUnknown, 0
	case v.mdb == nil || v.mdb.Status.ObservedGeneration == 0:
		return dbfleetv1alpha1.PlacementPending, 0
	}
	st := v.mdb.Status
	ready := min(st.ReadyReplicas, v.placement.Replicas)
	switch {
	case st.ObservedGeneration < v.mdb.Generation || st.Epoch < v.mdb.Spec.Epoch:
		return dbfleetv1alpha1.PlacementProgressing, ready
	case meta.IsStatusConditionTrue(st.Conditions, dbfleetv1alpha1.ConditionFenced),
		meta.IsStatusConditionTrue(st.Conditions, dbfleetv1alpha1.ConditionDegraded):
		return dbfleetv1alpha1.PlacementDegraded, ready
	case ready >= v.placement.Replicas && meta.IsStatusConditionTrue(st.Conditions, dbfleetv1alpha1.ConditionAvailable):
		return dbfleetv1alpha1.PlacementAvailable, ready
	default:
		return dbfleetv1alpha1.PlacementProgressing, ready
	}
}

// AvailableThreshold is how many ready replicas a DatabaseCluster needs, besides a ready primary,
// to count as Available: a majority of spec.replicas, the quorum most replication setups need.
func AvailableThreshold(replicas int32) int32 { return replicas/2 + 1 }

// aggregate fills status.replicas, readyReplicas, placements[].readyReplicas/state and the
// Propagated, Available, Progressing, Degraded and FailoverInProgress conditions from the shares.
func aggregate(s *scope) {
	dbc := s.dbc
	var total, ready int32
	var degraded, unknown, progressing, failed []string
	primaryState := dbfleetv1alpha1.PlacementPending
	primaryReady := false
	primaryCluster := ""
	if dbc.Status.Primary != nil {
		primaryCluster = dbc.Status.Primary.Cluster
	}
	for i := range dbc.Status.Placements {
		p := &dbc.Status.Placements[i]
		mc := s.members[p.Cluster]
		v := shareView{
			placement: *p,
			mdb:       s.memberDBs[p.Cluster],
			reachable: clusterReady(mc),
			err:       s.propagationErrors[p.Cluster],
		}
		state, r := shareState(v)
		p.State, p.ReadyReplicas = state, r
		total += p.Replicas
		ready += r
		if p.Cluster == primaryCluster {
			// The primary is the share's lowest ordinal: it is ready when the share reports a
			// ready replica at the current epoch and is neither fenced nor degraded.
			primaryState = state
			primaryReady = r > 0 && v.mdb != nil && v.mdb.Status.Epoch >= v.mdb.Spec.Epoch &&
				(state == dbfleetv1alpha1.PlacementAvailable || state == dbfleetv1alpha1.PlacementProgressing)
		}
		switch state {
		case dbfleetv1alpha1.PlacementUnknown:
			unknown = append(unknown, p.Cluster)
		case dbfleetv1alpha1.PlacementDegraded:
			degraded = append(degraded, fmt.Sprintf("%s (%d/%d ready)", p.Cluster, r, p.Replicas))
		case dbfleetv1alpha1.PlacementPending, dbfleetv1alpha1.PlacementProgressing:
			progressing = append(progressing, fmt.Sprintf("%s (%d/%d ready)", p.Cluster, r, p.Replicas))
		}
		if v.err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", p.Cluster, v.err))
		}
	}
	dbc.Status.Replicas, dbc.Status.ReadyReplicas = total, ready
	var evicting []string
	for i := range dbc.Status.Evictions {
		e := &dbc.Status.Evictions[i]
		mc := s.members[e.Cluster]
		_, e.ReadyReplicas = shareState(shareView{
			placement: dbfleetv1alpha1.ClusterPlacement{Cluster: e.Cluster, Replicas: e.Replicas},
			mdb:       s.memberDBs[e.Cluster],
			reachable: clusterReady(mc),
		})
		evicting = append(evicting, fmt.Sprintf("%s (%d/%d ready, %s)", e.Cluster, e.ReadyReplicas, e.Replicas, e.Reason))
	}
	dbc.Status.Ready = fmt.Sprintf("%d/%d", ready, total)

	gen := dbc.Generation
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&dbc.Status.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}

	switch {
	case len(dbc.Status.Placements) == 0:
		set(dbfleetv1alpha1.ConditionPropagated, metav1.ConditionFalse, ReasonNotScheduled, "nothing is placed yet")
	case len(failed) > 0:
		slices.Sort(failed)
		set(dbfleetv1alpha1.ConditionPropagated, metav1.ConditionFalse, ReasonPropagationFailed, listSome(failed))
	default:
		set(dbfleetv1alpha1.ConditionPropagated, metav1.ConditionTrue, ReasonAllPropagated,
			fmt.Sprintf("MemberDatabases written to %d clusters", len(dbc.Status.Placements)))
	}

	threshold := AvailableThreshold(dbc.Spec.Replicas)
	switch {
	case primaryCluster == "":
		set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonNotScheduled, "no primary is placed")
	case primaryState == dbfleetv1alpha1.PlacementUnknown:
		set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionUnknown, ReasonPrimaryUnknown,
			fmt.Sprintf("the agent of primary cluster %s is silent", primaryCluster))
	case !primaryReady:
		set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonPrimaryNotReady,
			fmt.Sprintf("the primary on %s is not ready", primaryCluster))
	case ready < threshold:
		set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, ReasonNoQuorum,
			fmt.Sprintf("%d of %d replicas ready, %d needed", ready, dbc.Spec.Replicas, threshold))
	default:
		set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, ReasonPrimaryReady,
			fmt.Sprintf("primary on %s ready; %d of %d replicas ready", primaryCluster, ready, dbc.Spec.Replicas))
	}

	switch {
	case len(progressing) > 0:
		msg := "rolling out: " + listSome(progressing)
		if len(evicting) > 0 {
			msg += "; evicted shares kept until then: " + listSome(evicting)
		}
		set(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, msg)
	case len(evicting) > 0:
		set(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, ReasonEvicting, "evicted shares kept until they may be purged: "+listSome(evicting))
	default:
		set(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, ReasonUpToDate, "every share is up to date")
	}

	switch {
	case len(unknown) > 0:
		msg := "agents silent: " + listSome(unknown)
		if len(degraded) > 0 {
			msg += "; degraded: " + listSome(degraded)
		}
		set(dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonSharesUnknown, msg)
	case len(degraded) > 0:
		set(dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, ReasonSharesDegraded, "degraded: "+listSome(degraded))
	default:
		set(dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, ReasonHealthy, "no share is degraded")
	}

	switch c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); {
	case c == nil:
		set(dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, ReasonNoFailover, "the primary is not moving")
	case c.Status == metav1.ConditionTrue && c.Reason == ReasonPromoted && primaryReady:
		failoverSeconds.Observe(time.Since(c.LastTransitionTime.Time).Seconds())
		set(dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, ReasonFailoverComplete,
			fmt.Sprintf("the primary on %s is ready at epoch %d", primaryCluster, dbc.Status.Primary.Epoch))
	}
}
