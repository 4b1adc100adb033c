package agent

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/agent/heartbeat"
	"github.com/dbfleet/dbfleet/pkg/agent/member"
)

// Settings are what one agent's components need besides its manager.
type Settings struct {
	// Cluster is the MemberCluster name.
	Cluster string
	// HeartbeatInterval and FenceAfter are the agent's --heartbeat-interval and --fence-after.
	HeartbeatInterval, FenceAfter time.Duration
	// InstanceImage is the agent's --instance-image (see member.Reconciler.InstanceImage).
	InstanceImage string
	// PrimaryLostAfter is the agent's --primary-lost-after (member.Reconciler.PrimaryLostAfter).
	PrimaryLostAfter time.Duration
	// Version is reported in the MemberClusterReport, and so in the MemberCluster status.
	Version string
	// Hub is a client of the hub with the join credentials; Member one of the member cluster.
	Hub, Member client.Client
	// MemberDiscovery asks the member API server for its version (the heartbeat's health check).
	MemberDiscovery discovery.ServerVersionInterface
	// ClockOffset moves the agent's clock (its hub Lease, its primary Leases, and what it compares
	// its instances' clocks with) off the system's: the agent's --clock-offset, for tests of
	// what a wrong agent clock does. Zero in production.
	ClockOffset time.Duration
	// Controller are the member reconciler's options (a process running several agents skips
	// controller name validation).
	Controller controller.TypedOptions[mcreconcile.Request]
}

// HubCache is the manager's cache scope on the hub: only the cluster's own member-<cluster>
// namespace, all the join credentials can read.
func HubCache(cluster string) cache.Options {
	return cache.Options{DefaultNamespaces: map[string]cache.Config{dbfleetv1alpha1.MemberNamespace(cluster): {}}}
}

// Setup adds the agent's components to mgr, whose local cluster is the hub and whose provider
// engages the member cluster: the fence guard, the member reconciler and the heartbeat. It
// returns the guard, which both share.
func Setup(mgr mcmanager.Manager, s Settings) (*fence.Guard, error) {
	if err := errors.Join(fence.ValidateTimings(s.HeartbeatInterval, s.FenceAfter)...); err != nil {
		return nil, fmt.Errorf("agent of %s: %w", s.Cluster, err)
	}
	var agentClock clock.WithTicker = clock.RealClock{}
	if s.ClockOffset != 0 {
		agentClock = shiftedClock{offset: s.ClockOffset}
	}
	guard := fence.NewGuard(agentClock, s.FenceAfter).WithRenewInterval(s.HeartbeatInterval)
	if err := member.Setup(mgr, guard, s.Controller, member.Settings{InstanceImage: s.InstanceImage, PrimaryLostAfter: s.PrimaryLostAfter}); err != nil {
		return nil, err
	}
	err := mgr.GetLocalManager().Add(&heartbeat.Heartbeat{
		Cluster: s.Cluster, Hub: s.Hub, Member: s.Member, MemberDiscovery: s.MemberDiscovery,
		Interval: s.HeartbeatInterval, FenceAfter: s.FenceAfter, AgentVersion: s.Version, Clock: agentClock,
		Guard: guard,
	})
	if err != nil {
		return nil, err
	}
	return guard, nil
}

// shiftedClock is the system clock moved by offset. Times it gives carry the monotonic reading
// moved by as much, so durations between them are the system's.
type shiftedClock struct {
	clock.RealClock
	offset time.Duration
}

func (c shiftedClock) Now() time.Time                  { return c.RealClock.Now().Add(c.offset) }
func (c shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
