package agent

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/options"
	"github.com/dbfleet/dbfleet/test/framework"
)

// stuckNamespaces holds every write to the member API server in a namespace named with prefix
// until released (or the request is cancelled): the passes of the shares there take a worker
// each and keep it, as passes do on a machine too busy to finish them.
type stuckNamespaces struct {
	next    http.RoundTripper
	prefix  string
	held    *atomic.Int32
	release <-chan struct{}
}

func (s stuckNamespaces) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet && strings.Contains(req.URL.Path, "/namespaces/"+s.prefix) {
		s.held.Add(1)
		select {
		case <-s.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return s.next.RoundTrip(req)
}

// The primary Lease follows each hub renewal at once, apart from the share's passes: here every
// worker of the agent is held by other shares' passes, and the live primary's own passes wait
// in the queue behind them, while its Lease goes on carrying each renewal within a moment.
func TestPrimaryLeaseFollowsEachRenewalWhileEveryWorkerIsBusy(t *testing.T) {
	prefix := fmt.Sprintf("busy-%d-", seq.Add(1))
	var held atomic.Int32
	release := make(chan struct{})
	cfg := rest.CopyConfig(east.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return stuckNamespaces{next: rt, prefix: prefix, held: &held, release: release}
	})
	guard := fence.NewGuard(clock.RealClock{}, 15*time.Second)
	guard.Renewed(time.Now())
	startAgentWithGuard(t, hub.Config, cfg, guard)
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseAll) // before the agent stops: its workers are the ones held

	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	heldFrom := func(renewed time.Time) func() bool {
		return func() bool {
			l := s.primaryLease()
			return l != nil && *l.Spec.HolderIdentity == clusterName+"/1" && l.Spec.RenewTime.Time.Equal(renewed.Truncate(time.Microsecond))
		}
	}
	s.eventually("primary Lease held", heldFrom(guard.LastRenewStart()))
	s.waitMDB("epoch 1 reported", func(m *dbfleetv1alpha1.MemberDatabase) bool { return m.Status.Epoch == 1 })

	// As many new shares as the agent has workers, each stuck in its first pass.
	for i := range options.AgentConcurrentReconciles {
		newShareIn(t, fmt.Sprintf("%s%d", prefix, i), 1, 0, dbfleetv1alpha1.RoleReplica)
	}
	if err := framework.WaitFor(s.ctx, framework.DefaultTimeout, "every worker held", func(context.Context) (bool, error) {
		return held.Load() >= int32(options.AgentConcurrentReconciles), nil
	}); err != nil {
		t.Fatal(err)
	}

	for i := range 3 {
		time.Sleep(time.Second) // a heartbeat
		renewed := time.Now()
		guard.Renewed(renewed)
		if err := framework.WaitFor(s.ctx, 2*time.Second, fmt.Sprintf("renewal %d in the primary Lease", i+1),
			func(context.Context) (bool, error) { return heldFrom(renewed)(), nil }); err != nil {
			t.Fatalf("%v: the Lease says %s while every worker is held", err, s.primaryLease().Spec.RenewTime)
		}
	}
	if n := held.Load(); n != int32(options.AgentConcurrentReconciles) {
		t.Errorf("%d writes held, want %d (one per worker): a worker got free and the test proves less", n, options.AgentConcurrentReconciles)
	}
	releaseAll()
}

// A share promoted while the agent's last hub renewal is old (the renewals due since failed, or
// are slow) starts with a Lease that carries a renewal asked for then, not the old one.
func TestAPromotedShareStartsWithAFreshHubRenewal(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Now())
	guard := fence.NewGuard(fake, 15*time.Second).WithRenewInterval(5 * time.Second)
	guard.Renewed(fake.Now())
	old := guard.LastRenewStart()
	fake.Step(12 * time.Second) // still fresh, with 3 s left
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { // the heartbeat, renewing when asked
		for {
			select {
			case <-guard.RenewalRequests():
				guard.Renewed(fake.Now())
			case <-ctx.Done():
				return
			}
		}
	}()
	startAgentWithGuard(t, hub.Config, east.Config, guard)

	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	s.eventually("primary Lease held", func() bool { return s.primaryLease() != nil })
	if got := s.primaryLease().Spec.RenewTime.Time; !got.Equal(fake.Now().Truncate(time.Microsecond)) {
		t.Errorf("the new primary's first Lease carries the renewal of %s (%s old), want the one it asked for at %s",
			got, fake.Now().Sub(got), fake.Now())
	}
	if guard.LastRenewStart().Equal(old) {
		t.Error("no renewal was asked for")
	}
}
