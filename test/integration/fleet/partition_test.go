package fleet

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

// joinedMember is a member cluster joined with `hub join` and its manifests, with its agent
// running on exactly the credentials join minted (and its member ServiceAccount).
type joinedMember struct {
	name  string
	env   *framework.Environment
	proxy *framework.Proxy
	agent *process
}

// joinMember joins a new member; with viaProxy its agent reaches the hub through a proxy the
// test can cut, otherwise at the server of the admin kubeconfig.
func joinMember(t *testing.T, hubBin, agentBin, adminPath, dir, name, region string, viaProxy bool) *joinedMember {
	t.Helper()
	ctx := context.Background()
	m := &joinedMember{name: name, env: startMember(t, name)}
	// The manifests go to the member, as `kubectl apply -f` would.
	manifests := filepath.Join(dir, name+"-agent.yaml")
	args := []string{"join", name, "--kubeconfig", adminPath, "--region", region, "--zone", region + "-a",
		"--heartbeat-interval", "1s", "--fence-after", "3s", "-o", manifests}
	if viaProxy {
		hubURL, err := url.Parse(hub.Config.Host)
		if err != nil {
			t.Fatal(err)
		}
		if m.proxy, err = framework.StartProxy(hubURL.Host); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.proxy.Close)
		args = append(args, "--hub-server", "https://"+m.proxy.Addr())
	}
	if out, err := exec.Command(hubBin, args...).CombinedOutput(); err != nil {
		t.Fatalf("hub join %s: %v\n%s", name, err, out)
	}
	objs, err := framework.ReadObjects(manifests)
	if err != nil {
		t.Fatal(err)
	}
	var hubKubeconfig []byte
	for _, obj := range objs {
		if err := m.env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("apply %s %s to %s: %v", obj.GetKind(), obj.GetName(), name, err)
		}
		if obj.GetKind() == "Secret" {
			secret := &corev1.Secret{}
			if err := m.env.Client.Get(ctx, client.ObjectKeyFromObject(obj), secret); err != nil {
				t.Fatal(err)
			}
			hubKubeconfig = secret.Data[join.KubeconfigKey]
		}
	}
	if hubKubeconfig == nil {
		t.Fatalf("the join manifests for %s carry no hub kubeconfig Secret", name)
	}
	m.agent = start(t, agentBin, "--cluster-name", name,
		"--hub-kubeconfig", writeFile(t, filepath.Join(dir, name+"-hub.kubeconfig"), hubKubeconfig),
		"--kubeconfig", writeFile(t, filepath.Join(dir, name+".kubeconfig"), memberKubeconfig(t, m.env)),
		"--heartbeat-interval", "1s", "--fence-after", "3s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	return m
}

// runPods plays the member's StatefulSet controller and kubelet: it creates the share's pods and
// reports them ready.
func (m *joinedMember) runPods(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	if err := framework.WaitFor(ctx, framework.DefaultTimeout, "StatefulSet in "+m.name, func(ctx context.Context) (bool, error) {
		return true, m.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, sts)
	}); err != nil {
		t.Fatal(err)
	}
	for i := int32(0); i < *sts.Spec.Replicas; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("orders-%d", sts.Spec.Ordinals.Start+i), Labels: sts.Spec.Template.Labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "database", Image: "postgres:16.4"}}},
		}
		if err := m.env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	markReady(t, m.env, ns)
}

func (m *joinedMember) podRole(ns, pod string) string {
	p := &corev1.Pod{}
	if err := m.env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, p); err != nil {
		return ""
	}
	return p.Labels[contract.LabelRole]
}

// TestPartitionedPrimaryFencesBeforePromotion cuts the primary cluster's agent off the hub while
// it keeps running. Each side's observations are timestamped by the test: the old primary must be
// fenced, and its member-local primary Lease expired, before the hub promotes another cluster.
func TestPartitionedPrimaryFencesBeforePromotion(t *testing.T) {
	primaryLoss(t, "north", "south", func(old *joinedMember) { old.proxy.Partition() }, true)
}

// TestKilledPrimaryAgentLeaseExpiresBeforePromotion kills the primary cluster's agent outright:
// nothing relabels its pods any more, so the member-local primary Lease, which the dead agent can
// no longer renew, is the authority, and it must have expired before the hub promotes elsewhere.
func TestKilledPrimaryAgentLeaseExpiresBeforePromotion(t *testing.T) {
	primaryLoss(t, "up", "down", func(old *joinedMember) {
		old.agent.kill()
	}, false)
}

// primaryLoss places a two-replica database on clusters a and b (fresh members, agents through
// proxies), loses the primary's cluster with lose, and checks the order of events: fenced (when
// the agent still runs: wantFenced) and old primary Lease expired, both before the promotion.
func primaryLoss(t *testing.T, a, b string, lose func(*joinedMember), wantFenced bool) {
	ctx := context.Background()
	dir := t.TempDir()
	hubBin, agentBin := build(t, dir)
	admin, err := hub.Kubeconfig("partition-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	adminPath := writeFile(t, filepath.Join(dir, "hub-admin.kubeconfig"), admin)
	start(t, hubBin, "run", "--kubeconfig", adminPath, "--leader-elect=false", "--cluster-grace-period", "3s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	members := map[string]*joinedMember{
		a: joinMember(t, hubBin, agentBin, adminPath, dir, a, "r-"+a, true),
		b: joinMember(t, hubBin, agentBin, adminPath, dir, b, "r-"+b, true),
	}
	for name := range members {
		waitMember(t, name, name+" Ready", func(mc *dbfleetv1alpha1.MemberCluster) bool {
			return meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady)
		})
	}

	ns := "loss-" + a
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	pp := &dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "both"},
		Spec: dbfleetv1alpha1.PropagationSpec{
			ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{Name: "orders"}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{a, b}},
				ClusterTolerations: []corev1.Toleration{{Key: dbfleetv1alpha1.TaintClusterUnreachable, Operator: corev1.TolerationOpExists,
					Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](1)}},
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided},
			},
		},
	}
	if err := hub.Client.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	dbc := &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.4",
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")}},
			Replicas: 2,
		},
	}
	if err := hub.Client.Create(ctx, dbc); err != nil {
		t.Fatal(err)
	}
	placed := waitDatabase(t, ns, "placed on both", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 2 && d.Status.Primary != nil
	})
	for _, m := range members {
		m.runPods(t, ns)
	}
	waitDatabase(t, ns, "Available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
	})
	oldName := placed.Status.Primary.Cluster
	old := members[oldName]
	primaryPod := placed.Status.Primary.Pod
	if role := old.podRole(ns, primaryPod); role != "primary" {
		t.Fatalf("pod %s in %s is %q, want primary", primaryPod, oldName, role)
	}

	// Lose the primary's agent: cut off the hub (it keeps running against its member) or killed.
	cut := time.Now()
	lose(old)

	// Watch both sides until the hub promotes, noting when each thing is first seen.
	var fencedAt, promotedAt time.Time
	var promoted *dbfleetv1alpha1.DatabaseCluster
	err = framework.WaitFor(ctx, 60*time.Second, "fencing and promotion", func(ctx context.Context) (bool, error) {
		if fencedAt.IsZero() && old.podRole(ns, primaryPod) == contract.PodRoleFenced {
			fencedAt = time.Now()
		}
		d := &dbfleetv1alpha1.DatabaseCluster{}
		if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(dbc), d); err != nil {
			return false, err
		}
		if d.Status.Primary != nil && d.Status.Primary.Cluster != oldName {
			promotedAt, promoted = time.Now(), d
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fenced := "never (no agent left to relabel the pod)"
	if !fencedAt.IsZero() {
		fenced = "at " + fencedAt.Sub(cut).Round(100*time.Millisecond).String()
	}
	t.Logf("agent lost at 0; old primary fenced %s; hub promoted %s at epoch %d at %s", fenced,
		promoted.Status.Primary.Cluster, promoted.Status.Primary.Epoch, promotedAt.Sub(cut).Round(100*time.Millisecond))
	if wantFenced && (fencedAt.IsZero() || !fencedAt.Before(promotedAt)) {
		t.Fatalf("the hub promoted before the cut-off primary fenced (fenced at %v, promoted at %v)", fencedAt, promotedAt)
	}
	if promoted.Status.Primary.Epoch != placed.Status.Primary.Epoch+1 {
		t.Errorf("epoch %d -> %d, want +1", placed.Status.Primary.Epoch, promoted.Status.Primary.Epoch)
	}
	// The old primary's member-local Lease had run out by the time of the promotion: no instant
	// with two primaries holding unexpired Leases.
	lease := &coordinationv1.Lease{}
	if err := old.env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: contract.PrimaryLeaseName("orders")}, lease); err != nil {
		t.Fatal(err)
	}
	expiry := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	if !expiry.Before(promotedAt) {
		t.Errorf("old primary Lease (holder %s) valid until %s, after the promotion at %s", *lease.Spec.HolderIdentity, expiry, promotedAt)
	}
	t.Logf("old primary Lease expired %s before the promotion", promotedAt.Sub(expiry).Round(100*time.Millisecond))
}

// markReady writes the StatefulSet's status as the member's controller manager would, with every
// replica ready; it retries when the agent's own writes move the object on.
func markReady(t *testing.T, member *framework.Environment, ns string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := &appsv1.StatefulSet{}
		if err := member.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "orders"}, sts); err != nil {
			return err
		}
		n := *sts.Spec.Replicas
		sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: n,
			CurrentReplicas: n, UpdatedReplicas: n, AvailableReplicas: n}
		return member.Client.Status().Update(context.Background(), sts)
	})
	if err != nil {
		t.Fatal(err)
	}
}
