package member

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

// renewerFixture is one agent with one primary share at epoch 2, its hub and member faked.
type renewerFixture struct {
	t      *testing.T
	ctx    context.Context
	clock  *clocktesting.FakeClock
	r      *Reconciler
	hub    client.Client
	member client.Client
	mdb    *dbfleetv1alpha1.MemberDatabase
	share  *shareState
	// refuse makes the member refuse Lease writes as a member API server that is down does.
	refuse atomic.Bool
}

const testFenceAfter = 15 * time.Second

func newRenewerFixture(t *testing.T) *renewerFixture {
	t.Helper()
	f := &renewerFixture{t: t, ctx: context.Background(), clock: clocktesting.NewFakeClock(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))}
	f.r = &Reconciler{Guard: fence.NewGuard(f.clock, testFenceAfter).WithRenewInterval(5 * time.Second)}
	f.r.Guard.Renewed(f.clock.Now())
	f.mdb = &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "member-east", Name: "shop.orders"}}
	f.mdb.Spec.DatabaseRef = dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: "orders"}
	f.mdb.Spec.Role, f.mdb.Spec.Epoch = dbfleetv1alpha1.RolePrimary, 2
	f.hub = fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(f.mdb).Build()
	refused := func() error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	f.member = fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if f.refuse.Load() {
				return refused()
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if f.refuse.Load() {
				return refused()
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	f.share = f.r.shares.get(shareKey{cluster: "east", NamespacedName: client.ObjectKeyFromObject(f.mdb)})
	return f
}

// pass renews the Lease as a pass of the live primary share does.
func (f *renewerFixture) pass() {
	f.t.Helper()
	if err := f.r.renewPrimaryLease(f.ctx, f.hub, f.member, f.mdb, f.share, "east"); err != nil {
		f.t.Fatal(err)
	}
}

// renew is a successful hub renewal after step, and the renewer's round it wakes.
func (f *renewerFixture) renew(step time.Duration) time.Time {
	f.t.Helper()
	f.clock.Step(step)
	f.r.Guard.Renewed(f.clock.Now())
	_, _ = f.r.renewLeases(f.ctx)
	return f.clock.Now()
}

// renewTime is the Lease's renewTime (zero without a Lease).
func (f *renewerFixture) renewTime() time.Time {
	f.t.Helper()
	l := &coordinationv1.Lease{}
	if err := f.member.Get(f.ctx, client.ObjectKey{Namespace: "shop", Name: contract.PrimaryLeaseName("orders")}, l); err != nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

func (f *renewerFixture) setHub(change func(*dbfleetv1alpha1.MemberDatabase)) {
	f.t.Helper()
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.hub.Get(f.ctx, client.ObjectKeyFromObject(f.mdb), mdb); err != nil {
		f.t.Fatal(err)
	}
	change(mdb)
	if err := f.hub.Update(f.ctx, mdb); err != nil {
		f.t.Fatal(err)
	}
}

// Once a pass has found the share a live primary, every hub renewal reaches its Lease without
// another pass, and the try is recorded as the lapse judgement needs it.
func TestRenewerCarriesEachRenewalIntoALivePrimarysLease(t *testing.T) {
	f := newRenewerFixture(t)
	if f.renew(time.Second); !f.renewTime().IsZero() {
		t.Fatal("the renewer wrote a Lease no pass had found live")
	}
	f.pass()
	for range 4 {
		renewed := f.renew(5 * time.Second)
		if got := f.renewTime(); !got.Equal(renewed) {
			t.Fatalf("after a renewal at %s the Lease says %s", renewed, got)
		}
		if f.share.lease.tried != (leaseTry{epoch: 2, renewed: renewed}) {
			t.Fatalf("tried %+v after the renewal at %s", f.share.lease.tried, renewed)
		}
	}
}

// What stops a pass from renewing stops the renewer: a fence or demotion (stop), a hub renewal
// that came after the agent was stale, the hub's MemberDatabase moving to another epoch or role
// or going, and a Lease that has lapsed.
func TestRenewerRenewsNothingAPassWouldNot(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before happens after the pass, and returns how long until the renewal the renewer sees.
		before func(*renewerFixture) time.Duration
	}{
		{"stopped by a pass (fenced, demoted, stale epoch, going)", func(f *renewerFixture) time.Duration {
			f.share.lease.stop()
			return 5 * time.Second
		}},
		{"a renewal after the agent was stale", func(*renewerFixture) time.Duration { return testFenceAfter }},
		{"a new epoch on the hub", func(f *renewerFixture) time.Duration {
			f.setHub(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Epoch = 3 })
			return 5 * time.Second
		}},
		{"demoted on the hub", func(f *renewerFixture) time.Duration {
			f.setHub(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Role = dbfleetv1alpha1.RoleReplica })
			return 5 * time.Second
		}},
		{"gone from the hub", func(f *renewerFixture) time.Duration {
			if err := f.hub.Delete(f.ctx, f.mdb); err != nil {
				f.t.Fatal(err)
			}
			return 5 * time.Second
		}},
		{"the Lease lapsed while the member refused every write", func(f *renewerFixture) time.Duration {
			f.refuse.Store(true)
			lapse, _ := primaryLeaseLapse(f.share.lease.tried, 2, testFenceAfter)
			for f.clock.Now().Add(5 * time.Second).Before(lapse) {
				f.renew(5 * time.Second) // fresh all along; every write refused
			}
			f.refuse.Store(false)
			return lapse.Sub(f.clock.Now())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRenewerFixture(t)
			f.pass()
			held := f.renewTime()
			f.renew(tc.before(f))
			if got := f.renewTime(); !got.Equal(held) {
				t.Errorf("the renewer renewed the Lease to %s (held from %s)", got, held)
			}
		})
	}
}

// A write that may have landed counts as tried; one refused before it reached the API server
// does not, so the lapse is judged from the last renewal that may be in the Lease.
func TestRenewerRecordsTriedRenewalsForTheLapse(t *testing.T) {
	f := newRenewerFixture(t)
	f.pass()
	held := f.share.lease.tried
	f.refuse.Store(true)
	f.renew(5 * time.Second)
	if f.share.lease.tried != held {
		t.Errorf("a refused write was recorded as tried: %+v, want %+v", f.share.lease.tried, held)
	}
	f.refuse.Store(false)
	timedOut := errors.New("the server was unable to return a response in the time allotted")
	f.member = fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return timedOut },
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return timedOut
		},
	}).Build()
	f.share.lease.live.member = f.member
	renewed := f.renew(5 * time.Second)
	if want := (leaseTry{epoch: 2, renewed: renewed}); f.share.lease.tried != want || f.share.lease.written == want {
		t.Errorf("after a write that may have landed: tried %+v, written %+v; want tried %+v, not written", f.share.lease.tried, f.share.lease.written, want)
	}
}

// A share promoted while the last hub renewal is old (the renewal due failed, or is slow) does
// not start with an aged Lease: the agent asks for a renewal now and writes that one.
func TestAPromotedShareStartsWithAFreshRenewal(t *testing.T) {
	f := newRenewerFixture(t)
	f.clock.Step(12 * time.Second) // the renewals due at 5 s and 10 s failed
	stop := make(chan struct{})
	defer close(stop)
	asked := make(chan time.Time, 1)
	go func() { // the heartbeat, renewing when asked
		select {
		case <-f.r.Guard.RenewalRequests():
			f.r.Guard.Renewed(f.clock.Now())
			asked <- f.clock.Now()
		case <-stop:
		}
	}()
	f.pass()
	select {
	case renewed := <-asked:
		if got := f.renewTime(); !got.Equal(renewed) {
			t.Errorf("the promoted share's first Lease says %s, want the renewal it asked for at %s", got, renewed)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no renewal asked for; the first Lease says %s, 12 s old", f.renewTime())
	}

	// Later passes at the same epoch carry what there is: the renewer keeps the Lease fresh.
	f.clock.Step(12 * time.Second)
	f.pass()
	select {
	case <-f.r.Guard.RenewalRequests():
		t.Error("a pass at an epoch whose Lease the agent wrote asked for a renewal")
	default:
	}
}

// Without an answer the first Lease carries the last renewal, after waiting at most
// firstLeaseMaxAge.
func TestAPromotedShareWaitsForAFreshRenewalOnlySoLong(t *testing.T) {
	f := newRenewerFixture(t)
	f.r.Guard.WithRenewInterval(200 * time.Millisecond)
	last := f.r.Guard.LastRenewStart()
	f.clock.Step(10 * time.Second)
	began := time.Now()
	f.pass()
	if waited := time.Since(began); waited < 200*time.Millisecond || waited > 5*time.Second {
		t.Errorf("waited %s for a renewal, want about the heartbeat interval, 200ms", waited)
	}
	if got := f.renewTime(); !got.Equal(last) {
		t.Errorf("the first Lease says %s, want the last renewal %s", got, last)
	}
}

func TestFirstLeaseMaxAge(t *testing.T) {
	for _, tc := range []struct{ fenceAfter, renewEvery, want time.Duration }{
		{15 * time.Second, 5 * time.Second, 5 * time.Second},
		{15 * time.Second, time.Second, time.Second},
		{15 * time.Second, 10 * time.Second, 5 * time.Second},
		{15 * time.Second, 0, 5 * time.Second},
	} {
		if got := firstLeaseMaxAge(tc.fenceAfter, tc.renewEvery); got != tc.want {
			t.Errorf("firstLeaseMaxAge(%s, %s) = %s, want %s", tc.fenceAfter, tc.renewEvery, got, tc.want)
		}
	}
}

// A pass that stops the renewals (before it fences or demotes) waits out a renewal in flight,
// and none starts after it: what the pass writes next is never overtaken by a renewal.
func TestStopWaitsForTheRenewalInFlight(t *testing.T) {
	f := newRenewerFixture(t)
	f.pass()
	inFlight, release := make(chan struct{}), make(chan struct{})
	f.share.lease.live.member = interceptor.NewClient(f.member.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			close(inFlight)
			<-release
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	f.clock.Step(5 * time.Second)
	f.r.Guard.Renewed(f.clock.Now())
	renewed := f.clock.Now()
	round := make(chan struct{})
	go func() { defer close(round); _, _ = f.r.renewLeases(f.ctx) }()
	<-inFlight
	stopped := make(chan struct{})
	go func() { defer close(stopped); f.share.lease.stop() }()
	select {
	case <-stopped:
		t.Fatal("stop returned while a renewal was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-stopped
	<-round
	if got := f.renewTime(); !got.Equal(renewed) {
		t.Fatalf("the renewal in flight did not land before stop returned: the Lease says %s", got)
	}
	f.renew(5 * time.Second)
	if got := f.renewTime(); !got.Equal(renewed) {
		t.Errorf("a renewal after stop reached the Lease: %s", got)
	}
}
