package clusterhealth

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

// A renewal counts from when the watch delivers it, before any reconcile runs: a lagging work
// queue must not look like a silent agent.
func TestLeaseEventsAreObservedBeforeReconcile(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	r := &Reconciler{Clock: clock, Observer: liveness.NewObserver(clock)}
	lease := func(name, cluster string, renew time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: name,
				Labels: map[string]string{dbfleetv1alpha1.LabelCluster: cluster}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renew}},
		}
	}

	clock.Step(30 * time.Second)
	reqs := r.observeLease(context.Background(), lease(dbfleetv1alpha1.AgentLeaseName, "east", clock.Now()))
	if len(reqs) != 1 || reqs[0].Name != "east" {
		t.Fatalf("an agent Lease maps to %v, want the MemberCluster east", reqs)
	}
	if silent, _ := r.Observer.SilentFor("east"); silent != 0 {
		t.Errorf("east silent for %s right after its renewal was delivered, want 0", silent)
	}

	// Another Lease in the namespace (a leader election, say) is neither observed nor mapped.
	clock.Step(10 * time.Second)
	if reqs := r.observeLease(context.Background(), lease("other", "east", clock.Now())); reqs != nil {
		t.Errorf("a foreign Lease maps to %v, want nothing", reqs)
	}
	if silent, _ := r.Observer.SilentFor("east"); silent != 10*time.Second {
		t.Errorf("east silent for %s after a foreign Lease changed, want 10s", silent)
	}
}

// A reconcile woken before the cache shows the controller's own last write of a MemberCluster
// waits for it instead of patching against the older copy (which the API server would refuse
// with a conflict, logged as an error).
func TestACacheBehindOurOwnWriteIsNotPatched(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 13, 0, 0, 0, time.UTC))
	mc := &dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}
	report := &dbfleetv1alpha1.MemberClusterReport{ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace("east"), Name: "east"}}
	report.Status.KubernetesVersion = "v1.35.4"
	var stale *dbfleetv1alpha1.MemberCluster // what a lagging cache returns, once set
	patches := 0
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(mc, report).WithStatusSubresource(mc).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if got, ok := obj.(*dbfleetv1alpha1.MemberCluster); ok && stale != nil {
					stale.DeepCopyInto(got)
					return nil
				}
				return c.Get(ctx, key, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				patches++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Clock: clock, GracePeriod: 20 * time.Second,
		Observer: liveness.NewObserver(clock)}
	r.Observer.Observe("east", clock.Now())
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "east"}}

	before := &dbfleetv1alpha1.MemberCluster{}
	if err := c.Get(ctx, req.NamespacedName, before); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if patches != 1 {
		t.Fatalf("first reconcile made %d status patches, want 1 (the report copied)", patches)
	}

	// The report changes; the cache still has the MemberCluster from before the first write.
	report.Status.KubernetesVersion = "v1.35.5"
	if err := c.Update(ctx, report); err != nil {
		t.Fatal(err)
	}
	stale = before
	res, err := r.Reconcile(ctx, req)
	if err != nil || patches != 1 || res.RequeueAfter != staleRecheck {
		t.Errorf("reconcile from a cache behind our write: err %v, %d patches, requeue %s; want no error, no patch, requeue %s",
			err, patches, res.RequeueAfter, staleRecheck)
	}

	// The cache catches up: the change is written.
	stale = nil
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	got := &dbfleetv1alpha1.MemberCluster{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if patches != 2 || got.Status.KubernetesVersion != "v1.35.5" {
		t.Errorf("after the cache caught up: %d patches, version %q; want 2 and v1.35.5", patches, got.Status.KubernetesVersion)
	}
}

// prober answers each probe with the Reachability it holds.
type prober struct{ r push.Reachability }

func (p *prober) Probe(context.Context, string) push.Reachability { return p.r }

// A Push cluster has no agent Lease: its health follows the hub's probe of its API server. A
// probe that fails within the grace period changes nothing; none answered for the grace period
// is Ready=Unknown and tainted; the hub keeps probing all along, so that the cluster comes back.
func TestPushClustersAreJudgedByTheHubsProbe(t *testing.T) {
	ctx := context.Background()
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	mc := &dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "east"},
		Spec: dbfleetv1alpha1.MemberClusterSpec{SyncMode: dbfleetv1alpha1.SyncPush,
			KubeconfigSecretRef: &dbfleetv1alpha1.SecretReference{Namespace: "dbfleet-system", Name: "east"}}}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(mc).WithStatusSubresource(mc).Build()
	p := &prober{}
	const grace = 20 * time.Second
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Clock: clock, GracePeriod: grace,
		Observer: liveness.NewObserver(clock), Prober: p}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "east"}}
	reconcile := func() (*dbfleetv1alpha1.MemberCluster, ctrl.Result) {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := &dbfleetv1alpha1.MemberCluster{}
		if err := c.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got, res
	}
	ready := func(mc *dbfleetv1alpha1.MemberCluster) (metav1.ConditionStatus, string) {
		c := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady)
		if c == nil {
			return "", ""
		}
		return c.Status, c.Reason
	}
	summary := &dbfleetv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}}

	p.r = push.Reachability{Reached: true, Ready: true, Version: "v1.35.4", Summary: summary}
	got, res := reconcile()
	if s, reason := ready(got); s != metav1.ConditionTrue || reason != dbfleetv1alpha1.ReasonMemberAPIServerReachable {
		t.Errorf("reachable and ready: Ready %s %s, want True %s", s, reason, dbfleetv1alpha1.ReasonMemberAPIServerReachable)
	}
	if ac := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionAgentConnected); ac == nil ||
		ac.Status != metav1.ConditionFalse || ac.Reason != dbfleetv1alpha1.ReasonPushMode {
		t.Errorf("AgentConnected %+v, want False %s", ac, dbfleetv1alpha1.ReasonPushMode)
	}
	if got.Status.KubernetesVersion != "v1.35.4" || got.Status.ResourceSummary == nil || got.Status.LastHeartbeat == nil {
		t.Errorf("status %+v, want the member's version and capacity and a last heartbeat", got.Status)
	}
	if res.RequeueAfter != grace/4 {
		t.Errorf("requeue after %s, want the probe interval %s", res.RequeueAfter, grace/4)
	}

	// Unreached, within the grace period: as it was.
	p.r = push.Reachability{Err: errors.New("connection refused")}
	clock.Step(grace / 2)
	if got, _ := reconcile(); len(got.Spec.Taints) != 0 {
		t.Errorf("taints %v within the grace period", got.Spec.Taints)
	} else if s, _ := ready(got); s != metav1.ConditionTrue {
		t.Errorf("Ready %s within the grace period, want still True", s)
	}

	// Answering but not ready: Ready=False at once (the API server said so), tainted not-ready.
	p.r = push.Reachability{Reached: true, Err: errors.New("HTTP 500")}
	got, _ = reconcile()
	if s, reason := ready(got); s != metav1.ConditionFalse || reason != dbfleetv1alpha1.ReasonMemberAPIServerNotReady {
		t.Errorf("not ready: Ready %s %s, want False %s", s, reason, dbfleetv1alpha1.ReasonMemberAPIServerNotReady)
	}

	// Unreached for longer than the grace period: Unknown and tainted; probing goes on.
	p.r = push.Reachability{Err: errors.New("connection refused")}
	clock.Step(grace + time.Second)
	got, res = reconcile()
	if s, reason := ready(got); s != metav1.ConditionUnknown || reason != dbfleetv1alpha1.ReasonMemberAPIServerUnreachable {
		t.Errorf("unreached: Ready %s %s, want Unknown %s", s, reason, dbfleetv1alpha1.ReasonMemberAPIServerUnreachable)
	}
	if len(got.Spec.Taints) != 2 || got.Spec.Taints[0].Key != dbfleetv1alpha1.TaintClusterUnreachable {
		t.Errorf("taints %v, want dbfleet.io/unreachable NoSchedule and NoExecute", got.Spec.Taints)
	}
	if res.RequeueAfter != grace/4 {
		t.Errorf("an unreachable Push cluster is looked at again after %s, want %s", res.RequeueAfter, grace/4)
	}

	// Back: Ready and untainted.
	p.r = push.Reachability{Reached: true, Ready: true}
	got, _ = reconcile()
	if s, _ := ready(got); s != metav1.ConditionTrue || len(got.Spec.Taints) != 0 {
		t.Errorf("back: Ready %s, taints %v; want True and none", s, got.Spec.Taints)
	}
}
