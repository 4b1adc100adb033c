package heartbeat

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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
