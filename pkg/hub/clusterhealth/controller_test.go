package clusterhealth

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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
