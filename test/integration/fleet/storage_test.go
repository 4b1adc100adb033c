package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestGrowingStorageReachesTheClaimTemplate grows a DatabaseCluster's storage from 1Gi to 2Gi
// through the hub, with the agent running on exactly the rights hub join grants it: the claims
// are expanded, the StatefulSet is replaced without its pods, its claim template asks for 2Gi
// and the share is Applied again.
func TestGrowingStorageReachesTheClaimTemplate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	hubBin, agentBin := build(t, dir)
	admin, err := hub.Kubeconfig("grow-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	adminPath := writeFile(t, filepath.Join(dir, "hub-admin.kubeconfig"), admin)
	m := joinMember(t, hubBin, agentBin, adminPath, dir, "grow", "us-grow", false)
	start(t, hubBin, "run", "--kubeconfig", adminPath, "--leader-elect=false", "--cluster-grace-period", "3s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	waitMember(t, "grow", "grow Ready", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		return meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady)
	})

	const ns = "growing"
	if err := m.env.Client.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "expandable"},
		Provisioner: "example.com/disk", AllowVolumeExpansion: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Create(ctx, &dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "grow-only"},
		Spec: dbfleetv1alpha1.PropagationSpec{
			ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{Name: "orders"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity:   &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"grow"}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided},
			},
		},
	}); err != nil {
		t.Fatal(err)
	}
	dbc := &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.4",
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi"), StorageClassName: ptr.To("expandable")}},
			Replicas: 2,
		},
	}
	if err := hub.Client.Create(ctx, dbc); err != nil {
		t.Fatal(err)
	}

	// The member runs no controllers: create the pods and their bound claims as its StatefulSet
	// controller and volume provisioner would.
	old := waitStatefulSet(t, m.env, ns, "StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	pods := map[string]types.UID{}
	tmpl := old.Spec.VolumeClaimTemplates[0]
	for i := int32(0); i < *old.Spec.Replicas; i++ {
		name := fmt.Sprintf("orders-%d", old.Spec.Ordinals.Start+i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: old.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: old.Name, UID: old.UID, Controller: ptr.To(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "database", Image: "postgres:16.4"}}},
		}
		if err := m.env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pods[name] = pod.UID
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-" + name, Labels: tmpl.Labels}, Spec: tmpl.Spec}
		if err := m.env.Client.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: tmpl.Spec.Resources.Requests}
		if err := m.env.Client.Status().Update(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
	markReady(t, m.env, ns)
	waitDatabase(t, ns, "Available at 1Gi", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
	})

	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(dbc), dbc); err != nil {
			return err
		}
		dbc.Spec.Storage.Size = resource.MustParse("2Gi")
		return hub.Client.Update(ctx, dbc)
	})
	if err != nil {
		t.Fatal(err)
	}
	going := waitStatefulSet(t, m.env, ns, "old StatefulSet deleted with propagation Orphan", func(sts *appsv1.StatefulSet) bool {
		return sts.UID == old.UID && slices.Contains(sts.Finalizers, metav1.FinalizerOrphanDependents)
	})
	for name := range pods {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := m.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-" + name}, pvc); err != nil {
			t.Fatal(err)
		}
		if got := pvc.Spec.Resources.Requests.Storage().String(); got != "2Gi" {
			t.Errorf("claim data-%s asks for %s before the StatefulSet is replaced, want 2Gi", name, got)
		}
	}
	// The garbage collector's part: release the pods, then the orphan finalizer.
	for name := range pods {
		pod := &corev1.Pod{}
		if err := m.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
			t.Fatal(err)
		}
		patched := pod.DeepCopy()
		patched.OwnerReferences = nil
		if err := m.env.Client.Patch(ctx, patched, client.MergeFrom(pod)); err != nil {
			t.Fatal(err)
		}
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &appsv1.StatefulSet{}
		if err := m.env.Client.Get(ctx, client.ObjectKeyFromObject(going), cur); err != nil {
			return err
		}
		cur.Finalizers = slices.DeleteFunc(cur.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
		return m.env.Client.Update(ctx, cur)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitStatefulSet(t, m.env, ns, "StatefulSet created again asking for 2Gi", func(sts *appsv1.StatefulSet) bool {
		return sts.UID != old.UID && sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() == "2Gi"
	})
	markReady(t, m.env, ns)
	for name, uid := range pods {
		pod := &corev1.Pod{}
		if err := m.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil || pod.UID != uid {
			t.Errorf("pod %s replaced or gone (%v)", name, err)
		}
	}
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace("grow"), Name: dbfleetv1alpha1.MemberDatabaseName(ns, "orders")}
	if err := framework.WaitFor(ctx, framework.DefaultTimeout, "share Applied at 2Gi", func(ctx context.Context) (bool, error) {
		if err := hub.Client.Get(ctx, key, mdb); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionApplied)
		return mdb.Spec.Database.Storage.Size.String() == "2Gi" && c != nil && c.Status == metav1.ConditionTrue &&
			c.Reason == dbfleetv1alpha1.ReasonApplied && c.ObservedGeneration == mdb.Generation, nil
	}); err != nil {
		t.Fatalf("%v\nstatus %+v", err, mdb.Status)
	}
	waitDatabase(t, ns, "Available at 2Gi, not degraded", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) &&
			meta.IsStatusConditionFalse(d.Status.Conditions, dbfleetv1alpha1.ConditionDegraded)
	})
}

func waitStatefulSet(t *testing.T, env *framework.Environment, ns, what string, cond func(*appsv1.StatefulSet) bool) *appsv1.StatefulSet {
	t.Helper()
	sts := &appsv1.StatefulSet{}
	err := framework.WaitFor(context.Background(), framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, sts); err != nil {
			return false, err
		}
		return cond(sts), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sts
}
