package member

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// setStatus fills the MemberDatabase status from what the pass did: the share's counts and its
// instances' reports, then one condition at a time. The epoch reported is the one the agent acted
// on: it is reported only once the share acts at it (pass.atEpoch), even when other objects failed.
func setStatus(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult, fenced bool) {
	mdb.Status.ObservedGeneration = mdb.Generation
	if pass.atEpoch {
		mdb.Status.Epoch = mdb.Spec.Epoch
	}
	setCounts(mdb, pass)
	setAppliedCondition(mdb, pass)
	setDegradedCondition(mdb, pass)
	setFencedCondition(mdb, pass, fenced)
	setClockSkewCondition(mdb, pass)
	available, progressing := readinessOf(mdb, pass, fenced)
	setCondition(mdb, dbfleetv1alpha1.ConditionAvailable, available.status, available.reason, available.message)
	setCondition(mdb, dbfleetv1alpha1.ConditionProgressing, progressing.status, progressing.reason, progressing.message)
}

// setCondition sets one condition at the MemberDatabase's generation.
func setCondition(mdb *dbfleetv1alpha1.MemberDatabase, t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&mdb.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: mdb.Generation,
	})
}

// imageMessage says which of the share's pods cannot get their image; empty when all can.
func (p passResult) imageMessage() string { return strings.Join(p.imageProblems, "; ") }

// applyFailure is the reason of Applied and Degraded when an object failed: a conflict (an object
// dbfleet did not create) only a person can resolve, or a failure a retry may mend.
func applyFailure(err error) string {
	if isConflict(err) {
		return dbfleetv1alpha1.ReasonNotManagedByAgent
	}
	return dbfleetv1alpha1.ReasonApplyFailed
}

// setCounts reports the StatefulSet's replicas, the version the share runs once it runs it, and
// the instances' reports and endpoints (kept as they were while the StatefulSet is not known).
func setCounts(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult) {
	st := &mdb.Status
	if pass.sts == nil {
		st.Replicas, st.ReadyReplicas = 0, 0
		return
	}
	st.Replicas, st.ReadyReplicas = pass.sts.Status.Replicas, pass.sts.Status.ReadyReplicas
	if runsSpecVersion(mdb, pass.sts) {
		st.Version = mdb.Spec.Database.Version
	}
	st.Instances, st.Endpoints = nil, nil
	if pass.instanceManaged || pass.imageMessage() != "" {
		st.Instances, st.Endpoints = pass.instances, pass.endpoints
	}
}

func setAppliedCondition(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult) {
	stsKey := mdb.Spec.DatabaseRef.Namespace + "/" + mdb.Spec.DatabaseRef.Name
	switch err := pass.err(); {
	case err != nil:
		setCondition(mdb, dbfleetv1alpha1.ConditionApplied, metav1.ConditionFalse, applyFailure(err), err.Error())
	case pass.storage != nil:
		setCondition(mdb, dbfleetv1alpha1.ConditionApplied, metav1.ConditionFalse, pass.storage.reason, pass.storage.message)
	case pass.replacing:
		setCondition(mdb, dbfleetv1alpha1.ConditionApplied, metav1.ConditionTrue, dbfleetv1alpha1.ReasonReplacingStatefulSet,
			fmt.Sprintf("StatefulSet %s is being replaced at epoch %d so that its claim template asks for %s; its pods and volumes stay",
				stsKey, mdb.Spec.Epoch, mdb.Spec.Database.Storage.Size.String()))
	default:
		setCondition(mdb, dbfleetv1alpha1.ConditionApplied, metav1.ConditionTrue, dbfleetv1alpha1.ReasonApplied,
			fmt.Sprintf("StatefulSet %s applied at epoch %d", stsKey, mdb.Spec.Epoch))
	}
}

func setDegradedCondition(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult) {
	switch err, imageMsg := pass.err(), pass.imageMessage(); {
	case err != nil:
		setCondition(mdb, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, applyFailure(err), err.Error())
	case imageMsg != "":
		// Applied as asked, but the pods can never start: the user has to change the version or
		// the image.
		setCondition(mdb, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, dbfleetv1alpha1.ReasonImagePullFailed, imageMsg)
	case pass.storage != nil:
		// Running as asked but for the volumes' size: nothing is broken, the user has to act.
		setCondition(mdb, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAsExpected, "the share runs as applied")
	default:
		setCondition(mdb, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAsExpected, "the share is applied as asked")
	}
}

func setFencedCondition(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult, fenced bool) {
	switch {
	case fenced && pass.fenceReason != "":
		setCondition(mdb, dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue, pass.fenceReason, pass.fenceMessage)
	case fenced:
		setCondition(mdb, dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue, dbfleetv1alpha1.ReasonHubLeaseExpired,
			fmt.Sprintf("the agent fenced its primary at epoch %d: no successful hub renewal within fenceAfter; it stays fenced until the hub hands out a higher epoch", mdb.Spec.Epoch))
	case mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && pass.primaryLost && pass.instanceFencedAt == mdb.Spec.Epoch:
		// Counted lost, and the instance says it has stopped at this epoch for good (its Lease,
		// which the agent renews no more, ran out): as certain a stop as the Lease's run-out,
		// and sooner. Reported as a loss, so that the hub promotes a standby, not this pod again
		// (a crash-looping primary fenced itself first, and was handed the next epoch).
		setCondition(mdb, dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue, dbfleetv1alpha1.ReasonPrimaryLost,
			fmt.Sprintf("%s at epoch %d, and its instance has fenced itself: the hub promotes the most advanced eligible standby at a higher epoch", pass.lostWhy, mdb.Spec.Epoch))
	case mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && pass.instanceFencedAt > 0 && pass.instanceFencedAt == mdb.Spec.Epoch:
		// The engine fenced itself (it saw no Lease renewal in time: a busy API server, say)
		// while the agent kept its hub lease. It stays fenced until a higher epoch, so say so:
		// the hub hands the share one when its cluster is healthy (repromoteFencedPrimary).
		setCondition(mdb, dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue, dbfleetv1alpha1.ReasonInstanceFenced,
			fmt.Sprintf("the primary instance fenced itself at epoch %d (it saw no primary Lease renewal in time); it stays fenced until the hub hands out a higher epoch", mdb.Spec.Epoch))
	default:
		setCondition(mdb, dbfleetv1alpha1.ConditionFenced, metav1.ConditionFalse, dbfleetv1alpha1.ReasonNotFenced, "the share's primary is not fenced")
	}
}

// setClockSkewCondition reports the instances' clocks against the agent's; a pass that measured
// none (no instance answered with its time) leaves the condition as it was.
func setClockSkewCondition(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult) {
	switch {
	case pass.clocks.skewed:
		setCondition(mdb, dbfleetv1alpha1.ConditionClockSkew, metav1.ConditionTrue, dbfleetv1alpha1.ReasonClocksDisagree, pass.clocks.message)
	case pass.clocks.measured:
		setCondition(mdb, dbfleetv1alpha1.ConditionClockSkew, metav1.ConditionFalse, dbfleetv1alpha1.ReasonClocksAgree, pass.clocks.message)
	}
}

// verdict is one condition's status, reason and message.
type verdict struct {
	status          metav1.ConditionStatus
	reason, message string
}

// readinessOf judges the share once for Available and Progressing: its StatefulSet rolled out
// and ready, and, where the instance manager runs, a primary that takes writes and every standby
// streaming.
func readinessOf(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult, fenced bool) (available, progressing verdict) {
	sts := pass.sts
	if sts == nil {
		v := verdict{metav1.ConditionUnknown, dbfleetv1alpha1.ReasonStatefulSetUnknown, "the StatefulSet is not applied"}
		return v, v
	}
	if msg := pass.imageMessage(); msg != "" {
		return verdict{metav1.ConditionFalse, dbfleetv1alpha1.ReasonImagePullFailed, msg},
			verdict{metav1.ConditionTrue, dbfleetv1alpha1.ReasonImagePullFailed, msg}
	}
	want, ready := mdb.Spec.Replicas, sts.Status.ReadyReplicas
	rolledOut := sts.Status.ObservedGeneration >= sts.Generation && ready >= want && sts.Status.UpdatedReplicas >= want
	if rolledOut && pass.instanceManaged {
		// The pods are ready; the database is available only if the instances say a primary
		// takes writes and every standby streams.
		if ok, msg := instancesAvailable(pass.instances, want, mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && !fenced); !ok {
			return verdict{metav1.ConditionFalse, dbfleetv1alpha1.ReasonInstancesNotReady, msg},
				verdict{metav1.ConditionTrue, dbfleetv1alpha1.ReasonInstancesNotReady, msg}
		}
	}
	if rolledOut {
		return verdict{metav1.ConditionTrue, dbfleetv1alpha1.ReasonAllReplicasReady, fmt.Sprintf("%d/%d replicas ready", ready, want)},
			verdict{metav1.ConditionFalse, dbfleetv1alpha1.ReasonUpToDate, "every replica runs the current spec"}
	}
	return verdict{metav1.ConditionFalse, dbfleetv1alpha1.ReasonReplicasNotReady, fmt.Sprintf("%d/%d replicas ready", ready, want)},
		verdict{metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingOut, fmt.Sprintf("%d/%d replicas updated, %d ready", sts.Status.UpdatedReplicas, want, ready)}
}

// runsSpecVersion says whether the share really runs spec.database's version: the StatefulSet's
// template has that version's image, the StatefulSet controller has seen that template
// (observedGeneration), every wanted pod runs it (the rollout is complete: updateRevision is
// currentRevision, as the controller records once every pod is updated and ready) and is ready.
// Until then the share reports the version it ran before: the hub moves a version roll on to
// the next share only when this one has finished.
func runsSpecVersion(mdb *dbfleetv1alpha1.MemberDatabase, sts *appsv1.StatefulSet) bool {
	want := mdb.Spec.Replicas
	st := sts.Status
	if want <= 0 || sts.Spec.Replicas == nil || *sts.Spec.Replicas != want || len(sts.Spec.Template.Spec.Containers) == 0 {
		return false
	}
	// The database container is the first (specs.StatefulSet); specs.WithInstanceManager renames it.
	if sts.Spec.Template.Spec.Containers[0].Image != specs.Image(&mdb.Spec.Database) {
		return false
	}
	return st.ObservedGeneration >= sts.Generation && st.UpdateRevision != "" && st.CurrentRevision == st.UpdateRevision &&
		st.Replicas == want && st.UpdatedReplicas == want && st.ReadyReplicas >= want
}

// setStale reports a MemberDatabase whose epoch is older than the one the member already runs.
func setStale(mdb *dbfleetv1alpha1.MemberDatabase, running int64) {
	msg := fmt.Sprintf("the MemberDatabase is at epoch %d but this member already runs epoch %d: a stale epoch is never acted on", mdb.Spec.Epoch, running)
	meta.SetStatusCondition(&mdb.Status.Conditions, metav1.Condition{
		Type: dbfleetv1alpha1.ConditionApplied, Status: metav1.ConditionFalse, Reason: dbfleetv1alpha1.ReasonStaleEpoch, Message: msg, ObservedGeneration: mdb.Generation,
	})
	mdb.Status.ObservedGeneration = mdb.Generation
}
