package heartbeat

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

type fixedVersion struct{}

func (fixedVersion) ServerVersion() (*version.Info, error) {
	return &version.Info{GitVersion: "v1.35.4"}, nil
}

// A beat with nothing new to report costs one request, the lease renewal: it reads neither the
// Lease nor the report. A change to report costs one more, the report's update, and no read.
func TestBeatReadsOnlyWhatItMust(t *testing.T) {
	ctx := context.Background()
	s := scheme.New()
	var gets, writes int
	hub := fake.NewClientBuilder().WithScheme(s).
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
	member := &switchableVersion{}
	hb := &Heartbeat{
		Cluster: "east", Hub: hub, Member: fake.NewClientBuilder().WithScheme(s).Build(), MemberDiscovery: member,
		Interval: 5 * time.Second, FenceAfter: 15 * time.Second, AgentVersion: "test", Clock: clock,
	}
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	report := &dbfleetv1alpha1.MemberClusterReport{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace("east"), Name: "east"}, report); err != nil {
		t.Fatalf("the first beat wrote no report: %v", err)
	}
	if c := meta.FindStatusCondition(report.Status.Conditions, dbfleetv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue ||
		report.Status.KubernetesVersion != "v1.35.4" || report.Status.Agent == nil || report.Status.Agent.HeartbeatIntervalSeconds != 5 {
		t.Errorf("first report = %+v, want Ready=True, version v1.35.4 and the agent's settings", report.Status)
	}

	gets, writes = 0, 0
	okBefore := testutil.ToFloat64(renewals.WithLabelValues("ok"))
	const quiet = 20
	for range quiet {
		clock.Step(5 * time.Second)
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if gets != 0 || writes != quiet {
		t.Errorf("%d quiet beats made %d reads and %d updates, want 0 reads and one update (the lease) each", quiet, gets, writes)
	}
	if n := testutil.ToFloat64(renewals.WithLabelValues("ok")) - okBefore; n != quiet {
		t.Errorf("dbfleet_agent_hub_lease_renewals_total{result=ok} went up by %v in %d beats", n, quiet)
	}

	gets, writes = 0, 0
	member.err = errors.New("connection refused")
	clock.Step(5 * time.Second)
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if gets != 0 || writes != 2 {
		t.Errorf("a beat with a change to report made %d reads and %d updates, want 0 reads and 2 updates (lease, report)", gets, writes)
	}

	// The hub changed the Lease behind the agent's back: the renewal reads it and succeeds.
	lease := &coordinationv1.Lease{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace("east"), Name: dbfleetv1alpha1.AgentLeaseName}, lease); err != nil {
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
	release := make(chan struct{})
	var renewals atomic.Int32
	hub := fake.NewClientBuilder().WithScheme(s).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*dbfleetv1alpha1.MemberClusterReport); ok {
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

// A report changed or deleted behind the agent's back is not overwritten from the agent's stale
// copy: the write is refused, the agent reads the report again and writes once more, in the same
// beat. Nothing else is lost: what another writer added stays.
func TestAReportChangedBehindTheAgentsBackIsReadAgain(t *testing.T) {
	ctx := context.Background()
	s := scheme.New()
	var reads, conflicts int
	hub := fake.NewClientBuilder().WithScheme(s).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*dbfleetv1alpha1.MemberClusterReport); ok {
					reads++
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				err := c.Update(ctx, obj, opts...)
				if _, ok := obj.(*dbfleetv1alpha1.MemberClusterReport); ok && (apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
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
	if err := hb.Report(ctx); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace("east"), Name: "east"}

	// Someone else labels the report; the agent's copy is now behind.
	current := &dbfleetv1alpha1.MemberClusterReport{}
	if err := hub.Get(ctx, key, current); err != nil {
		t.Fatal(err)
	}
	current.Labels["example.com/owner"] = "ops"
	if err := hub.Update(ctx, current); err != nil {
		t.Fatal(err)
	}
	reads, conflicts = 0, 0
	member.err = errors.New("connection refused")
	if err := hb.Report(ctx); err != nil {
		t.Fatal(err)
	}
	if conflicts != 1 || reads != 1 {
		t.Errorf("report from a stale copy: %d refused writes and %d reads, want 1 and 1", conflicts, reads)
	}
	got := &dbfleetv1alpha1.MemberClusterReport{}
	if err := hub.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Labels["example.com/owner"] != "ops" {
		t.Error("the agent's report removed the label written after the agent's copy")
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False (member API server unreachable)", c)
	}

	// Deleted: the agent creates it again.
	if err := hub.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	member.err = nil
	if err := hb.Report(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hub.Get(ctx, key, got); err != nil {
		t.Fatalf("a deleted report was not written again: %v", err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v after the member API server recovered, want True", c)
	}
}

// The hub waits the fenceAfter an agent reports before it promotes away from it, and its hub
// Lease says how long it may still act: both round a fractional fenceAfter up, never down.
func TestFractionalTimingsAreReportedRoundedUp(t *testing.T) {
	ctx := context.Background()
	s := scheme.New()
	hub := fake.NewClientBuilder().WithScheme(s).Build()
	hb := &Heartbeat{
		Cluster: "east", Hub: hub, Member: fake.NewClientBuilder().WithScheme(s).Build(), MemberDiscovery: fixedVersion{},
		Interval: 500 * time.Millisecond, FenceAfter: 1500 * time.Millisecond, AgentVersion: "test",
		Clock: clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)),
	}
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	ns := dbfleetv1alpha1.MemberNamespace("east")
	lease := &coordinationv1.Lease{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: dbfleetv1alpha1.AgentLeaseName}, lease); err != nil {
		t.Fatal(err)
	}
	if d := *lease.Spec.LeaseDurationSeconds; d != 2 {
		t.Errorf("hub Lease duration %d s for fenceAfter 1.5s, want 2", d)
	}
	report := &dbfleetv1alpha1.MemberClusterReport{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "east"}, report); err != nil {
		t.Fatal(err)
	}
	if a := report.Status.Agent; a == nil || a.FenceAfterSeconds != 2 || a.HeartbeatIntervalSeconds != 1 {
		t.Errorf("reported agent settings %+v, want fenceAfter 2 s and heartbeat 1 s", a)
	}
}

// A renewal asked for out of turn (a share being promoted whose last renewal is old) runs at
// once, not at the next tick.
func TestARequestedRenewalRunsAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := scheme.New()
	var renewals atomic.Int32
	count := func(obj client.Object, err error) {
		if _, ok := obj.(*coordinationv1.Lease); ok && err == nil {
			renewals.Add(1)
		}
	}
	hub := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			count(obj, err)
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := c.Update(ctx, obj, opts...)
			count(obj, err)
			return err
		},
	}).Build()
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)) // never stepped: no tick
	guard := fence.NewGuard(clock, 15*time.Second)
	hb := &Heartbeat{
		Cluster: "east", Hub: hub, Member: fake.NewClientBuilder().WithScheme(s).Build(), MemberDiscovery: fixedVersion{},
		Interval: 5 * time.Second, FenceAfter: 15 * time.Second, AgentVersion: "test", Clock: clock, Guard: guard,
	}
	stopped := make(chan error)
	go func() { stopped <- hb.Start(ctx) }()
	for want := int32(1); want <= 3; want++ {
		if want > 1 {
			guard.RequestRenewal()
		}
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return renewals.Load() >= want, nil
		})
		if err != nil {
			t.Fatalf("renewal %d did not happen (%d renewals)", want, renewals.Load())
		}
	}
	cancel()
	if err := <-stopped; err != nil {
		t.Errorf("Start() = %v", err)
	}
}

// A renewal the hub never answers is given up at fenceAfter, when it could no longer keep the
// agent fresh, so that the next one can start.
func TestARenewalThatHangsEndsAtFenceAfter(t *testing.T) {
	s := scheme.New()
	hub := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			<-ctx.Done() // a connection that died without a word
			return ctx.Err()
		},
	}).Build()
	const fenceAfter = 300 * time.Millisecond
	hb := &Heartbeat{
		Cluster: "east", Hub: hub, Member: fake.NewClientBuilder().WithScheme(s).Build(), MemberDiscovery: fixedVersion{},
		Interval: 100 * time.Millisecond, FenceAfter: fenceAfter, AgentVersion: "test", Clock: clocktesting.NewFakeClock(time.Now()),
	}
	began := time.Now()
	err := hb.Renew(context.Background())
	if took := time.Since(began); err == nil || took < fenceAfter || took > 5*time.Second {
		t.Errorf("a renewal the hub never answers returned %v after %s, want an error after fenceAfter (%s)", err, took, fenceAfter)
	}
}

// The member's version is asked with a timeout of its own (the call takes no context), never
// under 5 s, and longer with a longer heartbeat.
func TestMemberDiscoveryHasATimeout(t *testing.T) {
	for _, tc := range []struct{ interval, want time.Duration }{
		{time.Second, 5 * time.Second},
		{5 * time.Second, 5 * time.Second},
		{20 * time.Second, 20 * time.Second},
	} {
		cfg := &rest.Config{Host: "https://127.0.0.1:1"}
		disco, err := NewMemberDiscovery(cfg, tc.interval)
		if err != nil {
			t.Fatal(err)
		}
		rc, ok := disco.RESTClient().(*rest.RESTClient)
		if !ok || rc.Client == nil {
			t.Fatalf("discovery REST client %T has no HTTP client", disco.RESTClient())
		}
		if rc.Client.Timeout != tc.want {
			t.Errorf("interval %s: discovery client timeout %v, want %s", tc.interval, rc.Client.Timeout, tc.want)
		}
		if cfg.Timeout != 0 {
			t.Error("NewMemberDiscovery changed the member config it was given (its watches would be cut)")
		}
	}
}
