package databasecluster

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// shareView is what the hub knows of one placed share.
type shareView struct {
	placement dbfleetv1alpha1.ClusterPlacement
	mdb       *dbfleetv1alpha1.MemberDatabase
	// reachable is false when the cluster's agent has gone silent (Ready is not True): then
	// nothing it last reported is trusted.
	reachable bool
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

// shares is what the placed and the evicted shares add up to, as the condition setters read it.
type shares struct {
	// placed is how many clusters hold a placed share.
	placed int
	// ready counts the ready replicas of the placed shares.
	ready int32
	// primaryCluster holds the primary ("" when none is placed); primaryState is its share's
	// state and primaryReady whether it reports a ready primary at the current epoch.
	primaryCluster string
	primaryState   dbfleetv1alpha1.PlacementState
	primaryReady   bool
	// failed are "cluster: error" for the MemberDatabases that could not be written, sorted.
	failed []string
	// unknown, degraded and progressing name the placed shares in those states, evicting the
	// kept evicted shares, each with its ready count.
	unknown, degraded, progressing, evicting []string
}

// updateStatus fills status.replicas, readyReplicas, ready, placements[].readyReplicas and state
// and evictions[].readyReplicas from what the agents report, then sets each condition with its
// own setter: Propagated, Available, Progressing, Degraded and FailoverInProgress (Scheduled is
// set by scheduling).
func updateStatus(s *scope) {
	sh := summarize(s)
	dbc := s.dbc
	setPropagatedCondition(dbc, sh)
	setAvailableCondition(dbc, sh)
	setProgressingCondition(dbc, sh, s.roll.step)
	setDegradedCondition(dbc, sh)
	setFailoverInProgressCondition(dbc, s.failover, sh.primaryReady)
	setPrimaryFailsafeCondition(dbc, s.shareOn(sh.primaryCluster))
	dbc.Status.Endpoints = endpointsOf(s, replicationOf(s))
}

// summarize judges every share and writes its state and ready count into the status.
func summarize(s *scope) shares {
	dbc := s.dbc
	sh := shares{primaryState: dbfleetv1alpha1.PlacementPending, placed: len(dbc.Status.Placements)}
	if dbc.Status.Primary != nil {
		sh.primaryCluster = dbc.Status.Primary.Cluster
	}
	var total int32
	for i := range dbc.Status.Placements {
		p := &dbc.Status.Placements[i]
		v := shareView{placement: *p, mdb: s.memberDBs[p.Cluster], reachable: scheduling.ClusterReady(s.members[p.Cluster])}
		state, ready := shareState(v)
		p.State, p.ReadyReplicas = state, ready
		if v.mdb != nil {
			p.Version = v.mdb.Status.Version
		}
		total += p.Replicas
		sh.ready += ready
		if p.Cluster == sh.primaryCluster {
			// The primary (its pod, status.primary.pod) is ready when the share reports a ready
			// replica at the current epoch, is neither fenced nor degraded, and the pod's instance,
			// when it reports, runs as primary: a promoted pod still replaying up to its
			// promotion token is Ready as a standby but takes no write yet.
			sh.primaryState = state
			sh.primaryReady = ready > 0 && v.mdb != nil && v.mdb.Status.Epoch >= v.mdb.Spec.Epoch &&
				(state == dbfleetv1alpha1.PlacementAvailable || state == dbfleetv1alpha1.PlacementProgressing) &&
				shareOf(v.mdb).takesWrites(dbc.Status.Primary)
		}
		switch state {
		case dbfleetv1alpha1.PlacementUnknown:
			sh.unknown = append(sh.unknown, p.Cluster)
		case dbfleetv1alpha1.PlacementDegraded:
			sh.degraded = append(sh.degraded, fmt.Sprintf("%s (%d/%d ready%s)", p.Cluster, ready, p.Replicas, shareOf(v.mdb).degradedBecause()))
		case dbfleetv1alpha1.PlacementPending, dbfleetv1alpha1.PlacementProgressing:
			sh.progressing = append(sh.progressing, fmt.Sprintf("%s (%d/%d ready)", p.Cluster, ready, p.Replicas))
		}
		if err := s.propagationErrors[p.Cluster]; err != nil {
			sh.failed = append(sh.failed, fmt.Sprintf("%s: %v", p.Cluster, err))
		}
	}
	slices.Sort(sh.failed)
	dbc.Status.Replicas, dbc.Status.ReadyReplicas = total, sh.ready
	dbc.Status.Ready = fmt.Sprintf("%d/%d", sh.ready, total)
	for i := range dbc.Status.Evictions {
		e := &dbc.Status.Evictions[i]
		_, e.ReadyReplicas = shareState(shareView{
			placement: dbfleetv1alpha1.ClusterPlacement{Cluster: e.Cluster, Replicas: e.Replicas},
			mdb:       s.memberDBs[e.Cluster],
			reachable: scheduling.ClusterReady(s.members[e.Cluster]),
		})
		sh.evicting = append(sh.evicting, fmt.Sprintf("%s (%d/%d ready, %s)", e.Cluster, e.ReadyReplicas, e.Replicas, e.Reason))
	}
	return sh
}

// setCondition sets one condition at the object's generation.
func setCondition(dbc *dbfleetv1alpha1.DatabaseCluster, t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&dbc.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: dbc.Generation,
	})
}

// setPropagatedCondition: whether every placed cluster has its MemberDatabase written.
func setPropagatedCondition(dbc *dbfleetv1alpha1.DatabaseCluster, sh shares) {
	switch {
	case sh.placed == 0:
		setCondition(dbc, dbfleetv1alpha1.ConditionPropagated, metav1.ConditionFalse, dbfleetv1alpha1.ReasonNotScheduled, "nothing is placed yet")
	case len(sh.failed) > 0:
		setCondition(dbc, dbfleetv1alpha1.ConditionPropagated, metav1.ConditionFalse, dbfleetv1alpha1.ReasonPropagationFailed, listSome(sh.failed))
	default:
		setCondition(dbc, dbfleetv1alpha1.ConditionPropagated, metav1.ConditionTrue, dbfleetv1alpha1.ReasonAllPropagated,
			fmt.Sprintf("MemberDatabases written to %d clusters", sh.placed))
	}
}

// setAvailableCondition: whether the primary is ready and a majority of spec.replicas is.
func setAvailableCondition(dbc *dbfleetv1alpha1.DatabaseCluster, sh shares) {
	threshold := AvailableThreshold(dbc.Spec.Replicas)
	switch {
	case sh.primaryCluster == "":
		setCondition(dbc, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, dbfleetv1alpha1.ReasonNotScheduled, "no primary is placed")
	case sh.primaryState == dbfleetv1alpha1.PlacementUnknown:
		setCondition(dbc, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionUnknown, dbfleetv1alpha1.ReasonPrimaryClusterUnknown,
			fmt.Sprintf("the agent of primary cluster %s is silent", sh.primaryCluster))
	case !sh.primaryReady:
		setCondition(dbc, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, dbfleetv1alpha1.ReasonPrimaryNotReady,
			fmt.Sprintf("the primary on %s is not ready", sh.primaryCluster))
	case sh.ready < threshold:
		setCondition(dbc, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, dbfleetv1alpha1.ReasonTooFewReplicasReady,
			fmt.Sprintf("%d of %d replicas ready, %d needed", sh.ready, dbc.Spec.Replicas, threshold))
	default:
		setCondition(dbc, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, dbfleetv1alpha1.ReasonPrimaryReady,
			fmt.Sprintf("primary on %s ready; %d of %d replicas ready", sh.primaryCluster, sh.ready, dbc.Spec.Replicas))
	}
}

// setProgressingCondition: whether a version roll is under way (rollStep, planRoll's step),
// shares are still rolling out or evicted shares are kept. (Deletion sets its own
// WaitingForMemberCleanup in reconcileDelete, which never runs this.)
func setProgressingCondition(dbc *dbfleetv1alpha1.DatabaseCluster, sh shares, rollStep string) {
	switch {
	case rollStep != "":
		setCondition(dbc, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingVersion, rollStep)
	case len(sh.progressing) > 0:
		msg := "rolling out: " + listSome(sh.progressing)
		if len(sh.evicting) > 0 {
			msg += "; evicted shares kept until then: " + listSome(sh.evicting)
		}
		setCondition(dbc, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingOut, msg)
	case len(sh.evicting) > 0:
		setCondition(dbc, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonEvictingShares,
			"evicted shares kept until they may be purged: "+listSome(sh.evicting))
	default:
		setCondition(dbc, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, dbfleetv1alpha1.ReasonUpToDate, "every share is up to date")
	}
}

// setDegradedCondition: whether some share's agent is silent or some share is degraded or fenced.
func setDegradedCondition(dbc *dbfleetv1alpha1.DatabaseCluster, sh shares) {
	switch {
	case len(sh.unknown) > 0:
		msg := "agents silent: " + listSome(sh.unknown)
		if len(sh.degraded) > 0 {
			msg += "; degraded: " + listSome(sh.degraded)
		}
		setCondition(dbc, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, dbfleetv1alpha1.ReasonSharesUnknown, msg)
	case len(sh.degraded) > 0:
		setCondition(dbc, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, dbfleetv1alpha1.ReasonSharesDegraded, "degraded: "+listSome(sh.degraded))
	default:
		setCondition(dbc, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, dbfleetv1alpha1.ReasonHealthy, "no share is degraded")
	}
}

// setFailoverInProgressCondition is the only writer of FailoverInProgress. It is True while a
// primary move is held back (why, from f) or a promoted primary is not ready yet; False once the
// new primary is ready (FailoverComplete), when a move that was held back is no longer called
// for (FailoverCanceled: the primary's cluster came back, say), while a switchover asked for
// cannot happen (SwitchoverPending), and otherwise (NoFailover). A completed or canceled
// failover keeps its reason until the next one, so its message stays readable.
func setFailoverInProgressCondition(dbc *dbfleetv1alpha1.DatabaseCluster, f failoverFacts, primaryReady bool) {
	c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
	primary := "none"
	var epoch int64
	if p := dbc.Status.Primary; p != nil && p.Cluster != "" {
		primary, epoch = p.Cluster, p.Epoch
	}
	switch {
	case f.heldReason != "":
		setCondition(dbc, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, f.heldReason, f.heldMessage)
	case f.promoted != "":
		setCondition(dbc, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonPromoted, f.promoted)
	case c != nil && c.Status == metav1.ConditionTrue && c.Reason == dbfleetv1alpha1.ReasonPromoted && primaryReady:
		setCondition(dbc, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverComplete,
			fmt.Sprintf("the primary on %s is ready at epoch %d", primary, epoch))
	case c != nil && c.Status == metav1.ConditionTrue && c.Reason == dbfleetv1alpha1.ReasonPromoted:
		setCondition(dbc, dbfleetv1alpha1.ConditionFailoverInProgress, c.Status, c.Reason, c.Message) // still waiting for it
	case f.pendingSwitchover != "":
		setCondition(dbc, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonSwitchoverPending, f.pendingSwitchover)
	case c != nil && c.Status == metav1.ConditionTrue:
		setCondition(dbc, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverCanceled,
			fmt.Sprintf("the primary stays on %s at epoch %d: the move that waited (%s) is no longer called for", primary, epoch, c.Reason))
	case c == nil || c.Reason == dbfleetv1alpha1.ReasonSwitchoverPending:
		setCondition(dbc, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonNoFailover, "the primary is not moving")
	default:
		// FailoverComplete, FailoverCanceled or NoFailover, at the current generation.
		setCondition(dbc, dbfleetv1alpha1.ConditionFailoverInProgress, c.Status, c.Reason, c.Message)
	}
}

// setPrimaryFailsafeCondition says whether the primary's instance reports it takes writes on its
// failsafe, and whom it hears. The report may come late or not at all (its agent is the one cut
// off): what it says is what was last heard.
func setPrimaryFailsafeCondition(dbc *dbfleetv1alpha1.DatabaseCluster, primaryShare share) {
	var in *dbfleetv1alpha1.InstanceStatus
	if p := dbc.Status.Primary; p != nil {
		in = primaryShare.instance(p.Pod)
	}
	if in == nil || in.Role != dbfleetv1alpha1.InstanceRunningPrimary || in.Failsafe == nil || !in.Failsafe.Active {
		setCondition(dbc, dbfleetv1alpha1.ConditionPrimaryFailsafe, metav1.ConditionFalse, dbfleetv1alpha1.ReasonLeaseHeld, "the primary takes writes under its Lease")
		return
	}
	setCondition(dbc, dbfleetv1alpha1.ConditionPrimaryFailsafe, metav1.ConditionTrue, dbfleetv1alpha1.ReasonFailsafe, fmt.Sprintf(
		"the primary %s cannot renew its Lease and takes writes while it hears every standby (%s); it stops should one fall silent, and no standby is promoted while it may write",
		in.Pod, orNone(in.Failsafe.Members)))
}
