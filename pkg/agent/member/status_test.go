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

// Available and Progressing come from one judgement of the share, in order: the StatefulSet
// unknown, an image the pods cannot get, the instances' own word where the instance manager
// runs, then the rollout.
func TestReadinessOfAShare(t *testing.T) {
	rolled := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2}}
	rolling := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 1}}
	primary := dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningPrimary, Ready: true}
	standby := dbfleetv1alpha1.InstanceStatus{Pod: "orders-1", Role: dbfleetv1alpha1.InstanceRunningStandby, Ready: true}
	lagging := dbfleetv1alpha1.InstanceStatus{Pod: "orders-1", Role: dbfleetv1alpha1.InstanceRunningStandby}
	for _, tc := range []struct {
		name                  string
		pass                  passResult
		fenced                bool
		available, progressed metav1.ConditionStatus
		reason, progressing   string
	}{
		{"no StatefulSet", passResult{}, false, metav1.ConditionUnknown, metav1.ConditionUnknown,
			dbfleetv1alpha1.ReasonStatefulSetUnknown, dbfleetv1alpha1.ReasonStatefulSetUnknown},
		{"an image the pods cannot get", passResult{sts: rolled, imageProblems: []string{"orders-1: ErrImagePull"}}, false,
			metav1.ConditionFalse, metav1.ConditionTrue, dbfleetv1alpha1.ReasonImagePullFailed, dbfleetv1alpha1.ReasonImagePullFailed},
		{"rolled out, no instance manager", passResult{sts: rolled}, false,
			metav1.ConditionTrue, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAllReplicasReady, dbfleetv1alpha1.ReasonUpToDate},
		{"rolled out, the instances say so", passResult{sts: rolled, instanceManaged: true, instances: []dbfleetv1alpha1.InstanceStatus{primary, standby}}, false,
			metav1.ConditionTrue, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAllReplicasReady, dbfleetv1alpha1.ReasonUpToDate},
		{"rolled out, a standby does not stream", passResult{sts: rolled, instanceManaged: true, instances: []dbfleetv1alpha1.InstanceStatus{primary, lagging}}, false,
			metav1.ConditionFalse, metav1.ConditionTrue, dbfleetv1alpha1.ReasonInstancesNotReady, dbfleetv1alpha1.ReasonInstancesNotReady},
		{"rolled out, fenced: a running primary is one too many", passResult{sts: rolled, instanceManaged: true, instances: []dbfleetv1alpha1.InstanceStatus{primary, standby}}, true,
			metav1.ConditionFalse, metav1.ConditionTrue, dbfleetv1alpha1.ReasonInstancesNotReady, dbfleetv1alpha1.ReasonInstancesNotReady},
		{"rolling out", passResult{sts: rolling}, false,
			metav1.ConditionFalse, metav1.ConditionTrue, dbfleetv1alpha1.ReasonReplicasNotReady, dbfleetv1alpha1.ReasonRollingOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mdb := &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Generation: 3},
				Spec: dbfleetv1alpha1.MemberDatabaseSpec{Epoch: 1, Replicas: 2, Role: dbfleetv1alpha1.RolePrimary}}
			setStatus(mdb, tc.pass, tc.fenced)
			a := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
			p := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionProgressing)
			if a.Status != tc.available || a.Reason != tc.reason || p.Status != tc.progressed || p.Reason != tc.progressing || a.Message == "" || p.Message == "" {
				t.Errorf("Available %s/%s %q, Progressing %s/%s %q; want %s/%s, %s/%s", a.Status, a.Reason, a.Message, p.Status, p.Reason, p.Message,
					tc.available, tc.reason, tc.progressed, tc.progressing)
			}
		})
	}
}

// Degraded names the worst of what the pass found: a failed object, then an image the pods
// cannot get, and never a volume size the user has to change.
func TestDegradedNamesTheWorstProblem(t *testing.T) {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	kept := &storageKept{reason: dbfleetv1alpha1.ReasonStorageNotExpandable, message: "no"}
	failed := errors.New("apply Service shop/orders: forbidden")
	for _, tc := range []struct {
		name   string
		pass   passResult
		status metav1.ConditionStatus
		reason string
	}{
		{"a failed object and a missing image", passResult{sts: sts, errs: []error{failed}, imageProblems: []string{"orders-0: ErrImagePull"}},
			metav1.ConditionTrue, dbfleetv1alpha1.ReasonApplyFailed},
		{"a missing image and a kept volume size", passResult{sts: sts, storage: kept, imageProblems: []string{"orders-0: ErrImagePull"}},
			metav1.ConditionTrue, dbfleetv1alpha1.ReasonImagePullFailed},
		{"a kept volume size", passResult{sts: sts, storage: kept}, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAsExpected},
	} {
		mdb := &dbfleetv1alpha1.MemberDatabase{Spec: dbfleetv1alpha1.MemberDatabaseSpec{Replicas: 1}}
		setStatus(mdb, tc.pass, false)
		if d := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionDegraded); d.Status != tc.status || d.Reason != tc.reason {
			t.Errorf("%s: Degraded %s/%s, want %s/%s", tc.name, d.Status, d.Reason, tc.status, tc.reason)
		}
	}
}

// A primary whose instance fenced itself is reported InstanceFenced (the hub hands the same pod
// the next epoch), unless the agent counted it lost: then PrimaryLost, so that a standby takes
// over instead of the crash-looping pod.
func TestFencedSaysALostPrimaryWasLost(t *testing.T) {
	for _, tc := range []struct {
		lost bool
		want string
	}{{false, dbfleetv1alpha1.ReasonInstanceFenced}, {true, dbfleetv1alpha1.ReasonPrimaryLost}} {
		mdb := &dbfleetv1alpha1.MemberDatabase{Spec: dbfleetv1alpha1.MemberDatabaseSpec{Role: dbfleetv1alpha1.RolePrimary, Epoch: 4}}
		setFencedCondition(mdb, passResult{instanceFencedAt: 4, primaryLost: tc.lost, lostWhy: "the primary pod db-0 crash-looped"}, false)
		c := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionFenced)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.want {
			t.Errorf("lost %t: Fenced %+v, want True %s", tc.lost, c, tc.want)
		}
	}
}
