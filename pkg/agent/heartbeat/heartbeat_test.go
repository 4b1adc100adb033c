package heartbeat

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

type fixedVersion struct{}

func (fixedVersion) ServerVersion() (*version.Info, error) {
	return &version.Info{GitVersion: "v1.35.4"}, nil
}

// A beat with nothing new to report costs one request, the lease renewal: it reads neither the
// Lease nor the MemberCluster, except every rereadEvery beats.
func TestBeatReadsOnlyWhatItMust(t *testing.T) {
	ctx := context.Background()
	s := scheme.New()
	mc := &dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}
	var gets, writes int
	hub := fake.NewClientBuilder().WithScheme(s).WithObjects(mc).WithStatusSubresource(mc).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				gets++
				return c.Get(ctx, key, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				writes++
				return c.Update(ctx, obj, opts...)
			},
		}).Build()
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	hb := &Heartbeat{
		Cluster: "east", Hub: hub, Member: fake.NewClientBuilder().WithScheme(s).Build(), MemberDiscovery: fixedVersion{},
		Interval: 5 * time.Second, FenceAfter: 15 * time.Second, AgentVersion: "test", Clock: clock,
	}
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	gets, writes = 0, 0
	for range rereadEvery - 1 {
		clock.Step(5 * time.Second)
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if gets != 0 || writes != rereadEvery-1 {
		t.Errorf("%d quiet beats made %d reads and %d lease updates, want 0 reads and one update each", rereadEvery-1, gets, writes)
	}
	clock.Step(5 * time.Second)
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if gets != 1 {
		t.Errorf("beat %d made %d reads, want 1 (the MemberCluster, re-read)", rereadEvery, gets)
	}

	// The hub changed the Lease behind the agent's back: the renewal reads it and succeeds.
	lease := &coordinationv1.Lease{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace("east"), Name: LeaseName}, lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = nil
	if err := hub.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	clock.Step(5 * time.Second)
	if err := hb.Beat(ctx); err != nil {
		t.Fatalf("beat after a conflicting change: %v", err)
	}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
		t.Fatal(err)
	}
	if !lease.Spec.RenewTime.Time.Equal(clock.Now()) || lease.Spec.HolderIdentity == nil {
		t.Errorf("lease not renewed after a conflict: %+v", lease.Spec)
	}
}

// A status report the hub API server holds up (queued behind bulk writes, rejected, retried)
// must not hold back the Lease renewals the hub judges the cluster by.
func TestRenewalsGoOnWhileAReportWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := scheme.New()
	mc := &dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}
	release := make(chan struct{})
	var renewals atomic.Int32
	hub := fake.NewClientBuilder().WithScheme(s).WithObjects(mc).WithStatusSubresource(mc).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*dbfleetv1alpha1.MemberCluster); ok {
					<-release // the report waits until the test ends
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				err := c.Create(ctx, obj, opts...)
				if _, ok := obj.(*coordinationv1.Lease); ok && err == nil {
					renewals.Add(1)
				}
				return err
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				err := c.Update(ctx, obj, opts...)
				if _, ok := obj.(*coordinationv1.Lease); ok && err == nil {
					renewals.Add(1)
				}
				return err
			},
		}).Build()
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	hb := &Heartbeat{
		Cluster: "east", Hub: hub, Member: fake.NewClientBuilder().WithScheme(s).Build(), MemberDiscovery: fixedVersion{},
		Interval: 5 * time.Second, FenceAfter: 15 * time.Second, AgentVersion: "test", Clock: clock,
	}
	stopped := make(chan error)
	go func() { stopped <- hb.Start(ctx) }()
	for want := int32(1); want <= 4; want++ {
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return renewals.Load() >= want, nil
		})
		if err != nil {
			t.Fatalf("renewal %d did not happen while the first status report was waiting (%d renewals)", want, renewals.Load())
		}
		clock.Step(5 * time.Second)
	}
	close(release)
	cancel()
	if err := <-stopped; err != nil {
		t.Errorf("Start() = %v", err)
	}
}

// switchableVersion is a member discovery client that fails while err is set.
type switchableVersion struct{ err error }

func (v *switchableVersion) ServerVersion() (*version.Info, error) {
	if v.err != nil {
		return nil, v.err
	}
	return &version.Info{GitVersion: "v1.35.4"}, nil
}

// A report computed from a copy older than the hub's last change must not write the hub's
// conditions back as they were: the patch is refused, the agent reads the MemberCluster from
// etcd (not the watch cache) and patches again. Routine reads come from the watch cache.
func TestReportNeverWritesBackConditionsTheHubChanged(t *testing.T) {
	ctx := context.Background()
	s := scheme.New()
	mc := &dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "east"}}
	var reads []string // the resourceVersion each MemberCluster read asked for
	var patches, conflicts int
	hub := fake.NewClientBuilder().WithScheme(s).WithObjects(mc).WithStatusSubresource(mc).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*dbfleetv1alpha1.MemberCluster); ok {
					o := &client.GetOptions{}
					o.ApplyOptions(opts)
					rv := "<none>"
					if o.Raw != nil {
						rv = o.Raw.ResourceVersion
					}
					reads = append(reads, rv)
				}
				return c.Get(ctx, key, obj, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				patches++
				err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				if apierrors.IsConflict(err) {
					conflicts++
				}
				return err
			},
		}).Build()
	member := &switchableVersion{}
	hb := &Heartbeat{
		Cluster: "east", Hub: hub, Member: fake.NewClientBuilder().WithScheme(s).Build(), MemberDiscovery: member,
		Interval: 5 * time.Second, FenceAfter: 15 * time.Second, AgentVersion: "test",
		Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)),
	}
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if len(reads) != 1 || reads[0] != "0" || patches != 1 {
		t.Fatalf("first report: reads %v and %d patches, want one read from the watch cache (\"0\") and one patch", reads, patches)
	}

	// The hub writes a condition of its own; the agent's copy is now behind.
	current := &dbfleetv1alpha1.MemberCluster{}
	if err := hub.Get(ctx, client.ObjectKey{Name: "east"}, current); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&current.Status.Conditions, metav1.Condition{Type: "HubOnly", Status: metav1.ConditionTrue, Reason: "Test"})
	if err := hub.Status().Update(ctx, current); err != nil {
		t.Fatal(err)
	}

	// Something to report: the member API server fails.
	reads, patches, conflicts = nil, 0, 0
	member.err = errors.New("connection refused")
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if conflicts != 1 || patches != 2 || len(reads) != 1 || reads[0] != "" {
		t.Errorf("report from a stale copy: %d patches (%d refused), reads %v; want 2 patches (1 refused) and one read from etcd (\"\")",
			patches, conflicts, reads)
	}
	got := &dbfleetv1alpha1.MemberCluster{}
	if err := hub.Get(ctx, client.ObjectKey{Name: "east"}, got); err != nil {
		t.Fatal(err)
	}
	if meta.FindStatusCondition(got.Status.Conditions, "HubOnly") == nil {
		t.Error("the agent's report removed the condition the hub wrote after the agent's copy")
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False (member API server unreachable)", c)
	}
}
