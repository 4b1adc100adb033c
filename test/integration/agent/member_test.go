package agent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/agent/member"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
	"github.com/dbfleet/dbfleet/test/framework"
)

var seq atomic.Int64

// share is one MemberDatabase written as the hub writes it, for a database in a fresh namespace.
type share struct {
	t   *testing.T
	ctx context.Context
	ns  string // the database's namespace (in the member cluster too)
	db  string
	mdb *dbfleetv1alpha1.MemberDatabase
}

// newShare creates the share; change, if given, alters the MemberDatabase before it is created.
func newShare(t *testing.T, replicas, start int32, role dbfleetv1alpha1.ReplicaRole, change ...func(*dbfleetv1alpha1.MemberDatabase)) *share {
	t.Helper()
	return newShareIn(t, fmt.Sprintf("shop-%d", seq.Add(1)), replicas, start, role, change...)
}

// newShareIn is newShare for a database in the namespace ns.
func newShareIn(t *testing.T, ns string, replicas, start int32, role dbfleetv1alpha1.ReplicaRole, change ...func(*dbfleetv1alpha1.MemberDatabase)) *share {
	t.Helper()
	s := &share{t: t, ctx: context.Background(), ns: ns, db: "orders"}
	memberNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dbfleetv1alpha1.MemberNamespace(clusterName)}}
	if err := hub.Client.Create(s.ctx, memberNS); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	s.mdb = &dbfleetv1alpha1.MemberDatabase{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: dbfleetv1alpha1.MemberNamespace(clusterName),
			Name:      dbfleetv1alpha1.MemberDatabaseName(s.ns, s.db),
			Labels: map[string]string{dbfleetv1alpha1.LabelCluster: clusterName, dbfleetv1alpha1.LabelDatabase: s.db,
				dbfleetv1alpha1.LabelDatabaseNamespace: s.ns},
		},
		Spec: dbfleetv1alpha1.MemberDatabaseSpec{
			DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: s.ns, Name: s.db, UID: "uid-1"},
			Database: dbfleetv1alpha1.DatabaseTemplate{
				Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.4",
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("10Gi"), StorageClassName: ptr.To("fast"),
					RetentionPolicy: dbfleetv1alpha1.PVCRetentionPolicy{WhenDeleted: dbfleetv1alpha1.DeletePVC, WhenScaled: dbfleetv1alpha1.RetainPVC}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
				Template: &dbfleetv1alpha1.PodTemplateOverrides{
					Labels:       map[string]string{"team": "payments"},
					NodeSelector: map[string]string{"disk": "ssd"},
					Env:          []corev1.EnvVar{{Name: "POSTGRES_DB", Value: "orders"}},
				},
			},
			Replicas: replicas,
			Ordinals: dbfleetv1alpha1.MemberOrdinals{Start: start},
			Role:     role,
			Epoch:    1,
		},
	}
	for _, c := range change {
		c(s.mdb)
	}
	if err := hub.Client.Create(s.ctx, s.mdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.remove)
	return s
}

// remove deletes the share from the hub once its test is done, finalizer and all, and waits until
// it is gone. Every test's agent reconciles every MemberDatabase of the cluster: a share left
// behind would be run, and fenced, by the agents of the tests that follow, and count in what
// they measure (dbfleet_agent_primaries_fenced_total went up by 2 for one fence in CI).
func (s *share) remove() {
	s.t.Helper()
	ctx := context.Background()
	if err := hub.Client.Delete(ctx, s.mdb); err != nil && !apierrors.IsNotFound(err) {
		s.t.Errorf("delete MemberDatabase: %v", err)
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(s.mdb), mdb); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !controllerutil.RemoveFinalizer(mdb, dbfleetv1alpha1.MemberDatabaseFinalizer) {
			return nil
		}
		return client.IgnoreNotFound(hub.Client.Update(ctx, mdb))
	})
	if err != nil {
		s.t.Errorf("remove the MemberDatabase's finalizer: %v", err)
		return
	}
	err = framework.WaitFor(ctx, framework.DefaultTimeout, "MemberDatabase gone", func(ctx context.Context) (bool, error) {
		err := hub.Client.Get(ctx, client.ObjectKeyFromObject(s.mdb), &dbfleetv1alpha1.MemberDatabase{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		s.t.Error(err)
	}
}

func (s *share) key(name string) client.ObjectKey {
	return client.ObjectKey{Namespace: s.ns, Name: name}
}

// waitMDB polls the MemberDatabase on the hub until cond holds.
func (s *share) waitMDB(what string, cond func(*dbfleetv1alpha1.MemberDatabase) bool) *dbfleetv1alpha1.MemberDatabase {
	s.t.Helper()
	got := &dbfleetv1alpha1.MemberDatabase{}
	err := framework.WaitFor(s.ctx, framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(s.mdb), got); err != nil {
			return false, err
		}
		return cond(got), nil
	})
	if err != nil {
		s.t.Fatalf("%v\nstatus: %+v", err, got.Status)
	}
	return got
}

// waitSTS polls the member's StatefulSet until cond holds.
func (s *share) waitSTS(what string, cond func(*appsv1.StatefulSet) bool) *appsv1.StatefulSet {
	s.t.Helper()
	sts := &appsv1.StatefulSet{}
	err := framework.WaitFor(s.ctx, framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		if err := east.Client.Get(ctx, s.key(s.db), sts); err != nil {
			return false, err
		}
		return cond(sts), nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return sts
}

func condition(mdb *dbfleetv1alpha1.MemberDatabase, t string, status metav1.ConditionStatus) bool {
	c := meta.FindStatusCondition(mdb.Status.Conditions, t)
	return c != nil && c.Status == status && c.ObservedGeneration == mdb.Generation
}

// setStatefulSetStatus writes StatefulSet status as the member's controller manager would.
func (s *share) setStatefulSetStatus(ready int32) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := &appsv1.StatefulSet{}
		if err := east.Client.Get(s.ctx, s.key(s.db), sts); err != nil {
			return err
		}
		sts.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: sts.Generation, Replicas: *sts.Spec.Replicas, ReadyReplicas: ready,
			CurrentReplicas: *sts.Spec.Replicas, UpdatedReplicas: *sts.Spec.Replicas, AvailableReplicas: ready,
		}
		return east.Client.Status().Update(s.ctx, sts)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

func TestShareBecomesStatefulSetServiceAndBudgets(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShare(t, 2, 1000, dbfleetv1alpha1.RolePrimary)

	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	spec := sts.Spec
	if *spec.Replicas != 2 || spec.Ordinals == nil || spec.Ordinals.Start != 1000 || spec.ServiceName != s.db {
		t.Errorf("StatefulSet replicas/ordinals/service = %d/%v/%s, want 2/1000/%s", *spec.Replicas, spec.Ordinals, spec.ServiceName, s.db)
	}
	c := spec.Template.Spec.Containers[0]
	if c.Image != "postgres:16.4" || c.Resources.Requests.Cpu().String() != "500m" || c.Env[0].Name != "POSTGRES_DB" {
		t.Errorf("container %+v does not carry image, resources and env", c)
	}
	if spec.Template.Spec.NodeSelector["disk"] != "ssd" || spec.Template.Labels["team"] != "payments" {
		t.Errorf("template overrides missing: %+v", spec.Template)
	}
	if sts.Labels[dbfleetv1alpha1.LabelDatabase] != s.db || sts.Labels[dbfleetv1alpha1.LabelEpoch] != "1" {
		t.Errorf("StatefulSet labels %v lack database and epoch", sts.Labels)
	}
	vct := spec.VolumeClaimTemplates[0]
	if vct.Spec.Resources.Requests.Storage().String() != "10Gi" || *vct.Spec.StorageClassName != "fast" {
		t.Errorf("volume claim template %+v", vct.Spec)
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType ||
		p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("retention policy %+v, want Delete/Retain as asked", p)
	}

	svc := &corev1.Service{}
	if err := east.Client.Get(s.ctx, s.key(s.db), svc); err != nil { // applied before the StatefulSet
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Ports[0].Port != 5432 {
		t.Errorf("Service %+v is not headless on 5432", svc.Spec)
	}
	primary, replica := &policyv1.PodDisruptionBudget{}, &policyv1.PodDisruptionBudget{}
	if err := framework.WaitFor(s.ctx, framework.DefaultTimeout, "PodDisruptionBudgets", func(ctx context.Context) (bool, error) {
		if err := east.Client.Get(ctx, s.key(specs.PrimaryPDBName(s.db)), primary); err != nil {
			return false, err
		}
		return true, east.Client.Get(ctx, s.key(specs.ReplicaPDBName(s.db)), replica)
	}); err != nil {
		t.Fatal(err)
	}
	if primary.Spec.MinAvailable.IntValue() != 1 || primary.Spec.Selector.MatchLabels[contract.LabelRole] != "primary" {
		t.Errorf("primary PDB %+v", primary.Spec)
	}
	if replica.Spec.Selector.MatchLabels[contract.LabelRole] != "replica" {
		t.Errorf("replica PDB %+v", replica.Spec)
	}

	// Applied, then Available once the controller manager reports the pods ready.
	s.waitMDB("Applied", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionApplied, metav1.ConditionTrue) &&
			condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse) &&
			controllerutil.ContainsFinalizer(m, dbfleetv1alpha1.MemberDatabaseFinalizer) && m.Status.Epoch == 1
	})
	s.setStatefulSetStatus(2)
	got := s.waitMDB("Available", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue) &&
			condition(m, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionFalse)
	})
	if got.Status.ReadyReplicas != 2 || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status %+v", got.Status)
	}
}

func TestPodsAreLabelledWithTheirRole(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShare(t, 2, 1000, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	// The member has no controller manager here: create the pods as the StatefulSet controller would.
	for _, ordinal := range []int{1000, 1001} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: fmt.Sprintf("%s-%d", s.db, ordinal), Labels: sts.Spec.Template.Labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "database", Image: "postgres:16.4"}}},
		}
		if err := east.Client.Create(s.ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{s.db + "-1000": "primary", s.db + "-1001": "replica"}
	err := framework.WaitFor(s.ctx, framework.DefaultTimeout, "role labels", func(ctx context.Context) (bool, error) {
		for name, role := range want {
			pod := &corev1.Pod{}
			if err := east.Client.Get(ctx, s.key(name), pod); err != nil {
				return false, err
			}
			if pod.Labels[contract.LabelRole] != role {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The hub demotes the share: the former primary pod becomes a replica and the primary budget goes.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Role, m.Spec.Epoch = dbfleetv1alpha1.RoleReplica, 2 })
	err = framework.WaitFor(s.ctx, framework.DefaultTimeout, "demotion", func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{}
		if err := east.Client.Get(ctx, s.key(s.db+"-1000"), pod); err != nil {
			return false, err
		}
		pdbErr := east.Client.Get(ctx, s.key(specs.PrimaryPDBName(s.db)), &policyv1.PodDisruptionBudget{})
		return pod.Labels[contract.LabelRole] == "replica" && apierrors.IsNotFound(pdbErr), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitSTS("epoch 2 label", func(sts *appsv1.StatefulSet) bool { return sts.Labels[dbfleetv1alpha1.LabelEpoch] == "2" })
}

func TestDriftIsReverted(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShare(t, 3, 0, dbfleetv1alpha1.RoleReplica)
	s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := &appsv1.StatefulSet{}
		if err := east.Client.Get(s.ctx, s.key(s.db), sts); err != nil {
			return err
		}
		sts.Spec.Replicas = ptr.To[int32](7)
		sts.Spec.Template.Spec.Containers[0].Image = "postgres:9.6"
		return east.Client.Update(s.ctx, sts)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitSTS("drift reverted", func(sts *appsv1.StatefulSet) bool {
		return *sts.Spec.Replicas == 3 && sts.Spec.Template.Spec.Containers[0].Image == "postgres:16.4"
	})
}

func TestForeignObjectsAreNeverTouched(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	ns := fmt.Sprintf("shop-%d", seq.Add(1))
	// Someone else's StatefulSet already has the database's name.
	if err := east.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	foreign := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders", Labels: map[string]string{"owner": "someone-else"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "theirs"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "theirs"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "theirs:1"}}},
			},
		},
	}
	if err := east.Client.Create(context.Background(), foreign); err != nil {
		t.Fatal(err)
	}
	rv := foreign.ResourceVersion
	seq.Add(-1) // make newShare reuse the namespace we just filled
	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	if s.ns != ns {
		t.Fatalf("share namespace %s, want %s", s.ns, ns)
	}
	got := s.waitMDB("conflict reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionApplied, metav1.ConditionFalse)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionApplied); c.Reason != dbfleetv1alpha1.ReasonNotManagedByAgent ||
		!strings.Contains(c.Message, "was not created by dbfleet") {
		t.Errorf("Applied = %+v, want a conflict naming the object", c)
	}
	now := &appsv1.StatefulSet{}
	if err := east.Client.Get(context.Background(), client.ObjectKeyFromObject(foreign), now); err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != rv {
		t.Errorf("the foreign StatefulSet was modified (resourceVersion %s -> %s)", rv, now.ResourceVersion)
	}

	// Deleting the share must not delete the foreign object either.
	if err := hub.Client.Delete(context.Background(), s.mdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, hub.Client, s.mdb)
	if err := east.Client.Get(context.Background(), client.ObjectKeyFromObject(foreign), now); err != nil {
		t.Errorf("the foreign StatefulSet is gone after the share was removed: %v", err)
	}
}

func TestRemovalCleansUpAndConfirms(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	s.waitMDB("finalizer", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return controllerutil.ContainsFinalizer(m, dbfleetv1alpha1.MemberDatabaseFinalizer) &&
			condition(m, dbfleetv1alpha1.ConditionApplied, metav1.ConditionTrue)
	})
	// The share's primary Lease, as a live primary leaves it behind.
	if err := fence.RenewPrimaryLease(s.ctx, east.Client, s.ns, s.db, contract.Holder(clusterName, 1), time.Now(), 15*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Delete(s.ctx, s.mdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, hub.Client, s.mdb)
	for _, obj := range []client.Object{
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: contract.PrimaryLeaseName(s.db)}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: specs.PrimaryPDBName(s.db)}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: specs.ReplicaPDBName(s.db)}},
	} {
		if err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s still there after the share was removed (%v)", obj, obj.GetName(), err)
		}
	}
}

func TestAgentRestartIsIdempotent(t *testing.T) {
	stop := startAgent(t, hub.Config, east.Config)
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.setStatefulSetStatus(2)
	settled := s.waitMDB("Available", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue)
	})
	sts := &appsv1.StatefulSet{}
	if err := east.Client.Get(s.ctx, s.key(s.db), sts); err != nil {
		t.Fatal(err)
	}
	stop()

	reconciles := reconcileCount(t)
	startAgent(t, hub.Config, east.Config)
	// The restarted agent reconciles the share again (seen through its reconcile counter): it
	// applies the same objects, and server-side apply of an unchanged object changes nothing.
	err := framework.WaitFor(s.ctx, framework.DefaultTimeout, "a reconcile after restart", func(context.Context) (bool, error) {
		return reconcileCount(t) > reconciles, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	again := s.waitMDB("still Available", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue)
	})
	after := &appsv1.StatefulSet{}
	if err := east.Client.Get(s.ctx, s.key(s.db), after); err != nil {
		t.Fatal(err)
	}
	if after.Generation != sts.Generation {
		t.Errorf("restart changed the StatefulSet spec (generation %d -> %d)", sts.Generation, after.Generation)
	}
	c1 := meta.FindStatusCondition(settled.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
	c2 := meta.FindStatusCondition(again.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
	if !c1.LastTransitionTime.Equal(&c2.LastTransitionTime) {
		t.Errorf("restart flapped Available (%s -> %s)", c1.LastTransitionTime, c2.LastTransitionTime)
	}
}

func waitGone(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	err := framework.WaitFor(context.Background(), framework.DefaultTimeout, "deleted", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// reconcileCount is how many reconciles the member controller has finished.
func reconcileCount(t *testing.T) float64 {
	return framework.MetricSum(t, "controller_runtime_reconcile_total", map[string]string{"controller": member.Name})
}

// TestAShareInAReservedNamespaceIsRefused: a share for kube-system (which the hub never places;
// here written by hand, as a stolen hub credential could) gets nothing applied in the member and
// says why, with an Event.
func TestAShareInAReservedNamespaceIsRefused(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShareIn(t, "kube-system", 1, 0, dbfleetv1alpha1.RolePrimary)
	got := s.waitMDB("refused", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionApplied)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == dbfleetv1alpha1.ReasonReservedNamespace
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionApplied); !strings.Contains(c.Message, "kube-* belong to Kubernetes") {
		t.Errorf("Applied says %q, want why", c.Message)
	}
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &corev1.Service{}, &corev1.ServiceAccount{}} {
		err := east.Client.Get(s.ctx, s.key(s.db), obj)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%T %s in kube-system: %v, want none", obj, s.db, err)
		}
	}
}
