package agent

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	hubpkg "github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestHubDrivesPushMembers runs the hub's push controller: the same member reconciler, engaged
// with the member through a kubeconfig Secret on the hub instead of an agent.
func TestHubDrivesPushMembers(t *testing.T) {
	ctx := context.Background()
	kubeconfig, err := east.Kubeconfig("dbfleet-hub-push", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hubpkg.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	mc := &dbfleetv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: clusterName},
		Spec: dbfleetv1alpha1.MemberClusterSpec{SyncMode: dbfleetv1alpha1.SyncPush,
			KubeconfigSecretRef: &dbfleetv1alpha1.SecretReference{Namespace: hubpkg.Namespace, Name: clusterName}},
	}
	if err := hub.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Client.Delete(ctx, mc) })
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: hubpkg.Namespace, Name: clusterName, Labels: map[string]string{push.SecretLabel: "true"}},
		Data:       map[string][]byte{push.SecretKey: kubeconfig},
	}
	if err := hub.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Client.Delete(ctx, secret) })

	// The share exists before the hub engages the cluster: the hub must not miss it.
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)

	provider := push.NewProvider()
	mgr, err := mcmanager.New(hub.Config, provider, ctrl.Options{
		Scheme:                 framework.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{hubpkg.Namespace: {}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := push.Setup(ctx, mgr, provider); err != nil {
		t.Fatal(err)
	}
	framework.Run(t, "hub manager", mgr.Start)

	sts := s.waitSTS("StatefulSet applied by the hub", func(*appsv1.StatefulSet) bool { return true })
	if *sts.Spec.Replicas != 2 {
		t.Errorf("replicas %d, want 2", *sts.Spec.Replicas)
	}
	s.waitMDB("Applied reported by the hub", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionApplied, metav1.ConditionTrue)
	})

	// A Pull cluster's share (no kubeconfig Secret) is left to its agent: no status, no finalizer.
	west := &dbfleetv1alpha1.MemberDatabase{}
	s.mdb.DeepCopyInto(west)
	west.ObjectMeta = metav1.ObjectMeta{
		Namespace: dbfleetv1alpha1.MemberNamespace("west"), Name: s.mdb.Name,
		Labels: map[string]string{dbfleetv1alpha1.LabelCluster: "west", dbfleetv1alpha1.LabelDatabase: s.db},
	}
	west.Status = dbfleetv1alpha1.MemberDatabaseStatus{}
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: west.Namespace}}); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Create(ctx, west); err != nil {
		t.Fatal(err)
	}
	// Deleting the Push share proves the hub kept working after seeing west's.
	if err := hub.Client.Delete(ctx, s.mdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, hub.Client, s.mdb)
	got := &dbfleetv1alpha1.MemberDatabase{}
	if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(west), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("the hub touched a Pull cluster's share: finalizers %v, conditions %v", got.Finalizers, got.Status.Conditions)
	}
}
