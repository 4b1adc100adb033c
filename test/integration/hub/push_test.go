package hub

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/clusterhealth"
	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
	"github.com/dbfleet/dbfleet/test/framework"
)

// startPushHub runs the hub as `hub run` wires it: the databasecluster, clusterhealth and push
// controllers on one multicluster manager whose provider engages Push members from their
// kubeconfig Secrets.
func startPushHub(t *testing.T, cfg hub.Config) {
	t.Helper()
	provider := push.NewProvider()
	mgr, err := mcmanager.New(env.Config, provider, ctrl.Options{
		Scheme:                 framework.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{hub.Namespace: {}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg.PushProvider = provider
	cfg.Liveness = liveness.NewObserver(clock.RealClock{})
	if err := databasecluster.Setup(ctx, mgr.GetLocalManager(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := clusterhealth.Setup(ctx, mgr.GetLocalManager(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := push.Setup(ctx, mgr, provider); err != nil {
		t.Fatal(err)
	}
	framework.Run(t, "hub manager", mgr.Start)
}

// pushMember joins a member API server in Push mode, as `hub join --sync-mode Push` does: the
// MemberCluster, its namespace, and the kubeconfig Secret the push controller reads.
func (f *fixture) pushMember(name string, member *framework.Environment) string {
	f.t.Helper()
	full := strings.Trim(clusterPrefix(f.suite)+"-"+name, "-")
	kubeconfig, err := member.Kubeconfig("dbfleet-hub-push", "system:masters")
	if err != nil {
		f.t.Fatal(err)
	}
	f.createNamespace(hub.Namespace)
	f.createNamespace(dbfleetv1alpha1.MemberNamespace(full))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: hub.Namespace, Name: push.SecretName(full), Labels: map[string]string{push.SecretLabel: "true"}},
		Data:       map[string][]byte{push.SecretKey: kubeconfig},
	}
	if err := f.c.Create(f.ctx, secret); err != nil {
		f.t.Fatal(err)
	}
	mc := &dbfleetv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: full, Labels: map[string]string{suiteLabel: f.suite}},
		Spec: dbfleetv1alpha1.MemberClusterSpec{Region: "r1", Zone: "r1-a", SyncMode: dbfleetv1alpha1.SyncPush,
			KubeconfigSecretRef: &dbfleetv1alpha1.SecretReference{Namespace: secret.Namespace, Name: secret.Name}},
	}
	if err := f.c.Create(f.ctx, mc); err != nil {
		f.t.Fatal(err)
	}
	return full
}

// readyNode adds a Ready Node with the given CPUs to a member API server (which has no kubelet),
// so that the member has capacity to report.
func readyNode(t *testing.T, member *framework.Environment, name string, cpus int64) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := member.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Status = corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}
	if err := member.Client.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}

// TestPushMemberStaysReadyAndGetsItsShare joins a real member API server in Push mode and runs
// the hub's scheduler over it (no MemberDatabase written by hand): the hub's own probes keep
// the member Ready and untainted past several grace periods, its capacity comes from the
// member's Nodes, the scheduler gives it its share, and the push controller applies it. Stopping
// the member's API server makes it Ready=Unknown and tainted unreachable.
func TestPushMemberStaysReadyAndGetsItsShare(t *testing.T) {
	const grace = 2 * time.Second
	f := newFixture(t)
	member, err := framework.StartMember("push-member")
	if err != nil {
		t.Fatal(err)
	}
	stopMember := sync.OnceValue(member.Stop)
	t.Cleanup(func() { _ = stopMember() })
	readyNode(t, member, "node-1", 8)

	startPushHub(t, hub.Config{ClusterGracePeriod: grace, HeartbeatStatusInterval: grace / 4})
	p := f.pushMember("p", member)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 3, map[string]string{"app": "orders"})

	mc := f.waitMember(p, "Ready=True from the hub's probe", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		return meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady)
	})
	readySince := time.Now()
	if c := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady); c.Reason != dbfleetv1alpha1.ReasonMemberAPIServerReachable {
		t.Errorf("Ready reason %s, want %s", c.Reason, dbfleetv1alpha1.ReasonMemberAPIServerReachable)
	}
	if c := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionAgentConnected); c == nil ||
		c.Status != metav1.ConditionFalse || c.Reason != dbfleetv1alpha1.ReasonPushMode {
		t.Errorf("AgentConnected %+v, want False with reason %s", c, dbfleetv1alpha1.ReasonPushMode)
	}
	if !strings.HasPrefix(mc.Status.KubernetesVersion, "v1.") {
		t.Errorf("kubernetesVersion %q, want the member's", mc.Status.KubernetesVersion)
	}
	mc = f.waitMember(p, "the member's capacity, from its Node", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		s := mc.Status.ResourceSummary
		return s != nil && s.Allocatable.Cpu().Cmp(resource.MustParse("8")) == 0
	})

	// The scheduler places the whole database on the Push member, and the hub applies it there.
	f.waitMemberDatabases("orders", map[string]int32{p: 3})
	sts := &appsv1.StatefulSet{}
	err = framework.WaitFor(f.ctx, framework.DefaultTimeout, "StatefulSet in the Push member", func(ctx context.Context) (bool, error) {
		list := &appsv1.StatefulSetList{}
		if err := member.Client.List(ctx, list, client.MatchingLabels{dbfleetv1alpha1.LabelDatabase: "orders"}); err != nil {
			return false, err
		}
		if len(list.Items) != 1 {
			return false, nil
		}
		sts = &list.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet replicas %v, want 3", sts.Spec.Replicas)
	}

	// Ready all along, for three grace periods: never Unknown, never tainted.
	err = framework.WaitFor(f.ctx, framework.DefaultTimeout, "three grace periods of a Ready Push member", func(ctx context.Context) (bool, error) {
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := f.c.Get(ctx, client.ObjectKey{Name: p}, mc); err != nil {
			return false, err
		}
		if !meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) || len(mc.Spec.Taints) != 0 {
			t.Fatalf("a reachable Push member lost Ready: conditions %v, taints %v", mc.Status.Conditions, mc.Spec.Taints)
		}
		return time.Since(readySince) > 3*grace, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	dbc := f.getDatabase("orders")
	if got := shares(dbc); got[p] != 3 {
		t.Errorf("placements %v after three grace periods, want all 3 replicas on %s", got, p)
	}

	// The member's API server goes away: Unknown after the grace period, tainted unreachable.
	if err := stopMember(); err != nil {
		// The hub's open watches can keep kube-apiserver from a graceful stop; envtest then kills it.
		t.Logf("the member API server did not stop gracefully: %v", err)
	}
	mc = f.waitMember(p, "Ready=Unknown and tainted unreachable", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		taints := healthTaints(mc, dbfleetv1alpha1.TaintClusterUnreachable)
		return meta.IsStatusConditionPresentAndEqual(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown) &&
			taints[corev1.TaintEffectNoSchedule] && taints[corev1.TaintEffectNoExecute]
	})
	if c := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady); c.Reason != dbfleetv1alpha1.ReasonMemberAPIServerUnreachable {
		t.Errorf("Ready reason %s, want %s", c.Reason, dbfleetv1alpha1.ReasonMemberAPIServerUnreachable)
	}
}
