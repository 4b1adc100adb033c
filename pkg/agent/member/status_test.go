package member

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestStatusOfAPass(t *testing.T) {
	pdbErr := errors.New("apply PodDisruptionBudget shop/orders-replica: forbidden")
	conflict := &conflictError{kind: "StatefulSet", key: "shop/orders"}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	for _, tc := range []struct {
		name                 string
		pass                 passResult
		applied, degraded    metav1.ConditionStatus
		reason               string
		epochReported, retry bool
	}{
		{"all applied", passResult{sts: sts, atEpoch: true},
			metav1.ConditionTrue, metav1.ConditionFalse, dbfleetv1alpha1.ReasonApplied, true, false},
		{"a budget failed, the epoch still acted on", passResult{sts: sts, atEpoch: true, errs: []error{pdbErr}},
			metav1.ConditionFalse, metav1.ConditionTrue, dbfleetv1alpha1.ReasonApplyFailed, true, true},
		{"the StatefulSet is someone else's", passResult{errs: []error{conflict}},
			metav1.ConditionFalse, metav1.ConditionTrue, dbfleetv1alpha1.ReasonNotManagedByAgent, false, false},
		{"a conflict and a failure: retried", passResult{errs: []error{conflict, pdbErr}},
			metav1.ConditionFalse, metav1.ConditionTrue, dbfleetv1alpha1.ReasonNotManagedByAgent, false, true},
		{"storage kept", passResult{sts: sts, atEpoch: true, storage: &storageKept{reason: dbfleetv1alpha1.ReasonStorageNotExpandable, message: "no"}},
			metav1.ConditionFalse, metav1.ConditionFalse, dbfleetv1alpha1.ReasonStorageNotExpandable, true, false},
		{"StatefulSet being replaced", passResult{sts: sts, atEpoch: true, replacing: true},
			metav1.ConditionTrue, metav1.ConditionFalse, dbfleetv1alpha1.ReasonReplacingStatefulSet, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mdb := &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Generation: 3},
				Spec: dbfleetv1alpha1.MemberDatabaseSpec{Epoch: 7, Replicas: 1}}
			setStatus(mdb, tc.pass, false)
			applied := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionApplied)
			degraded := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionDegraded)
			if applied.Status != tc.applied || applied.Reason != tc.reason || applied.ObservedGeneration != 3 || degraded.Status != tc.degraded {
				t.Errorf("Applied %s/%s, Degraded %s; want Applied %s/%s, Degraded %s", applied.Status, applied.Reason, degraded.Status, tc.applied, tc.reason, tc.degraded)
			}
			if reported := mdb.Status.Epoch == 7; reported != tc.epochReported {
				t.Errorf("epoch reported %v (status epoch %d), want %v", reported, mdb.Status.Epoch, tc.epochReported)
			}
			if got := retryable(tc.pass.errs); got != tc.retry {
				t.Errorf("retryable = %v, want %v", got, tc.retry)
			}
		})
	}
}

func TestIsDataClaim(t *testing.T) {
	for claim, want := range map[string]bool{
		"data-orders-0":         true,
		"data-orders-1001":      true,
		"data-orders-archive-0": false, // the claim of StatefulSet orders-archive
		"data-orders-":          false,
		"data-orders-x":         false,
		"logs-orders-0":         false,
	} {
		if got := isDataClaim("orders", claim); got != want {
			t.Errorf("isDataClaim(orders, %s) = %v, want %v", claim, got, want)
		}
	}
}

// The share reports a version only once every wanted pod runs the StatefulSet template of that
// version and is ready; until then it keeps the version it reported before, which is what the
// hub's version roll waits on before it moves to the next share.
func TestVersionIsReportedOnceTheRolloutIsDone(t *testing.T) {
	const oldImage, newImage = "postgres:16.4", "postgres:16.5"
	sts := func(image string, gen, observed int64, current, update string, replicas, updated, ready int32) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		s.Spec.Replicas = &replicas
		s.Spec.Template.Spec.Containers = []corev1.Container{{Name: "postgres", Image: image}}
		s.Status = appsv1.StatefulSetStatus{ObservedGeneration: observed, CurrentRevision: current, UpdateRevision: update,
			Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready}
		return s
	}
	for _, tc := range []struct {
		name, before, want string
		sts                *appsv1.StatefulSet
	}{
		{"rollout complete", "16.4", "16.5", sts(newImage, 2, 2, "r2", "r2", 2, 2, 2)},
		{"template not yet seen by the StatefulSet controller", "16.4", "16.4", sts(newImage, 2, 1, "r1", "r1", 2, 2, 2)},
		{"highest ordinal updated, the other not yet", "16.4", "16.4", sts(newImage, 2, 2, "r1", "r2", 2, 1, 2)},
		{"every pod updated, one not ready yet", "16.4", "16.4", sts(newImage, 2, 2, "r1", "r2", 2, 2, 1)},
		{"revisions agree but a pod is not ready", "16.4", "16.4", sts(newImage, 2, 2, "r2", "r2", 2, 2, 1)},
		{"the StatefulSet still has the old version's image", "16.4", "16.4", sts(oldImage, 1, 1, "r1", "r1", 2, 2, 2)},
		{"a new share reports nothing until it is ready", "", "", sts(newImage, 1, 1, "", "r1", 2, 0, 0)},
		{"a new share once ready", "", "16.5", sts(newImage, 1, 1, "r1", "r1", 2, 2, 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mdb := &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Generation: 3},
				Spec: dbfleetv1alpha1.MemberDatabaseSpec{Epoch: 1, Replicas: 2, Role: dbfleetv1alpha1.RoleReplica,
					Database: dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.5"}}}
			mdb.Status.Version = tc.before
			setStatus(mdb, passResult{sts: tc.sts, atEpoch: true}, false)
			if mdb.Status.Version != tc.want {
				t.Errorf("status.version %q, want %q", mdb.Status.Version, tc.want)
			}
		})
	}
}
