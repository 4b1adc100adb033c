package member

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
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
