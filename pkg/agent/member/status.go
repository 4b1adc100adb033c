package member

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// setStatus fills the MemberDatabase status from what the pass did. The epoch reported is the one
// the agent acted on: it is reported only once the share acts at it (pass.atEpoch), even when
// other objects failed.
func setStatus(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult, fenced bool) {
	st := &mdb.Status
	gen := mdb.Generation
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}
	st.ObservedGeneration = gen
	sts := pass.sts
	stsKey := mdb.Spec.DatabaseRef.Namespace + "/" + mdb.Spec.DatabaseRef.Name
	switch applyErr := pass.err(); {
	case applyErr != nil:
		reason := dbfleetv1alpha1.ReasonApplyFailed
		if isConflict(applyErr) {
			reason = dbfleetv1alpha1.ReasonNotManagedByAgent
		}
		set(dbfleetv1alpha1.ConditionApplied, metav1.ConditionFalse, reason, applyErr.Error())
		set(dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, reason, applyErr.Error())
	case pass.storage != nil:
		// Running as asked but for the volumes' size: nothing is broken, the user has to act.
		set(dbfleetv1alpha1.ConditionApplied, metav1.ConditionFalse, pass.storage.reason, pass.storage.message)
		set(dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAsExpected, "the share runs as applied")
	case pass.replacing:
		set(dbfleetv1alpha1.ConditionApplied, metav1.ConditionTrue, dbfleetv1alpha1.ReasonReplacingStatefulSet,
			fmt.Sprintf("StatefulSet %s is being replaced at epoch %d so that its claim template asks for %s; its pods and volumes stay",
				stsKey, mdb.Spec.Epoch, mdb.Spec.Database.Storage.Size.String()))
		set(dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAsExpected, "the share is applied as asked")
	default:
		set(dbfleetv1alpha1.ConditionApplied, metav1.ConditionTrue, dbfleetv1alpha1.ReasonApplied,
			fmt.Sprintf("StatefulSet %s applied at epoch %d", stsKey, mdb.Spec.Epoch))
		set(dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAsExpected, "the share is applied as asked")
	}
	imageMsg := strings.Join(pass.imageProblems, "; ")
	if imageMsg != "" && pass.err() == nil {
		// Applied as asked, but the pods can never start: the user has to change the version or
		// the image.
		set(dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, dbfleetv1alpha1.ReasonImagePullFailed, imageMsg)
	}
	if pass.atEpoch {
		st.Epoch = mdb.Spec.Epoch
	}
	switch {
	case fenced && pass.fenceMessage != "":
		set(dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue, dbfleetv1alpha1.ReasonPrimaryLeaseLapsed, pass.fenceMessage)
	case fenced:
		set(dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue, dbfleetv1alpha1.ReasonHubLeaseExpired,
			fmt.Sprintf("the agent fenced its primary at epoch %d: no successful hub renewal within fenceAfter; it stays fenced until the hub hands out a higher epoch", mdb.Spec.Epoch))
	case mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && pass.instanceFencedAt > 0 && pass.instanceFencedAt == mdb.Spec.Epoch:
		// The engine fenced itself (it saw no Lease renewal in time: a busy API server, say)
		// while the agent kept its hub lease. It stays fenced until a higher epoch, so say so:
		// the hub hands the share one when its cluster is healthy (repromoteFencedPrimary).
		set(dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue, dbfleetv1alpha1.ReasonInstanceFenced,
			fmt.Sprintf("the primary instance fenced itself at epoch %d (it saw no primary Lease renewal in time); it stays fenced until the hub hands out a higher epoch", mdb.Spec.Epoch))
	default:
		set(dbfleetv1alpha1.ConditionFenced, metav1.ConditionFalse, dbfleetv1alpha1.ReasonNotFenced, "the share's primary is not fenced")
	}
	switch {
	case pass.clocks.skewed:
		set(dbfleetv1alpha1.ConditionClockSkew, metav1.ConditionTrue, dbfleetv1alpha1.ReasonClocksDisagree, pass.clocks.message)
	case pass.clocks.measured:
		set(dbfleetv1alpha1.ConditionClockSkew, metav1.ConditionFalse, dbfleetv1alpha1.ReasonClocksAgree, pass.clocks.message)
	}
	if sts == nil {
		st.Replicas, st.ReadyReplicas = 0, 0
		set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionUnknown, dbfleetv1alpha1.ReasonStatefulSetUnknown, "the StatefulSet is not applied")
		set(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionUnknown, dbfleetv1alpha1.ReasonStatefulSetUnknown, "the StatefulSet is not applied")
		return
	}
	want := mdb.Spec.Replicas
	st.Replicas, st.ReadyReplicas = sts.Status.Replicas, sts.Status.ReadyReplicas
	if runsSpecVersion(mdb, sts) {
		st.Version = mdb.Spec.Database.Version
	}
	if imageMsg != "" {
		st.Instances, st.Endpoints = pass.instances, pass.endpoints
		set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, dbfleetv1alpha1.ReasonImagePullFailed, imageMsg)
		set(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonImagePullFailed, imageMsg)
		return
	}
	current := sts.Status.ObservedGeneration >= sts.Generation
	if pass.instanceManaged {
		st.Instances, st.Endpoints = pass.instances, pass.endpoints
	} else {
		st.Instances, st.Endpoints = nil, nil
	}
	if current && st.ReadyReplicas >= want && sts.Status.UpdatedReplicas >= want && pass.instanceManaged {
		// The pods are ready; the database is available only if the instances say a primary
		// takes writes and every standby streams.
		if ok, msg := instancesAvailable(pass.instances, want, mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && !fenced); !ok {
			set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, dbfleetv1alpha1.ReasonInstancesNotReady, msg)
			set(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonInstancesNotReady, msg)
			return
		}
	}
	if current && st.ReadyReplicas >= want && sts.Status.UpdatedReplicas >= want {
		set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, dbfleetv1alpha1.ReasonAllReplicasReady, fmt.Sprintf("%d/%d replicas ready", st.ReadyReplicas, want))
		set(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, dbfleetv1alpha1.ReasonUpToDate, "every replica runs the current spec")
		return
	}
	set(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, dbfleetv1alpha1.ReasonReplicasNotReady, fmt.Sprintf("%d/%d replicas ready", st.ReadyReplicas, want))
	set(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingOut,
		fmt.Sprintf("%d/%d replicas updated, %d ready", sts.Status.UpdatedReplicas, want, st.ReadyReplicas))
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
	// The database container is the first (DesiredStatefulSet); withInstanceManager renames it.
	if sts.Spec.Template.Spec.Containers[0].Image != Image(&mdb.Spec.Database) {
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
