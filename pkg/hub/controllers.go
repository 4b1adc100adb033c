package hub

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"
)

// Namespace is the hub's own namespace on the hub cluster: the leader election Lease of `hub run`
// and the kubeconfig Secrets of Push clusters live there. `hub run` creates it when it is missing.
const Namespace = "dbfleet-system"

// Config is what hub controllers may need from the command line and from each other.
type Config struct {
	// PushProvider engages Push-mode member clusters; the manager was built with it. The push
	// controller runs the member reconciler over it, and clusterhealth probes Push members'
	// API servers through the connections it holds.
	PushProvider *kubeconfig.Provider
	// ClusterGracePeriod is how long the hub waits without observing a member's lease renewal
	// before it marks the cluster Ready=Unknown.
	ClusterGracePeriod time.Duration
	// HeartbeatStatusInterval is how stale MemberCluster status.lastHeartbeat may get before the
	// hub rewrites it: the Lease is the fine-grained signal, the status field is for people, and
	// at 1,000 clusters a rewrite every half grace period was a quarter of the hub API server's
	// requests at rest.
	HeartbeatStatusInterval time.Duration
	// DefaultUnreachableToleration is how long a placement tolerates the hub's health taints
	// (dbfleet.io/unreachable, dbfleet.io/not-ready) when its clusterTolerations say nothing of
	// them; nil means the placement engine's default (10 s).
	DefaultUnreachableToleration *time.Duration
	// EvictionRate is how many shares per second may leave failed clusters, hub-wide (0: no
	// limit), with bursts of EvictionBurst.
	EvictionRate  float64
	EvictionBurst int
	// UnhealthyClusterThreshold is the share of a database's clusters that, not Ready at once,
	// pauses its evictions for failure (0: the default, 0.55).
	UnhealthyClusterThreshold float64
	// Liveness is the hub's memory of agent renewals, shared by clusterhealth (which feeds it)
	// and databasecluster (whose failover gate reads it).
	Liveness *liveness.Observer
}

// InitFunc registers one controller with the manager. The manager's local cluster is the hub;
// controllers of hub objects use mgr.GetLocalManager().
type InitFunc func(ctx context.Context, mgr mcmanager.Manager, cfg Config) error

// Registry maps controller names to their set-up functions, so that --controllers can turn each
// on or off by name.
type Registry map[string]InitFunc

// Names returns the registered names, sorted.
func (r Registry) Names() []string {
	names := make([]string, 0, len(r))
	for name := range r {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Enabled resolves a --controllers list: "*" turns on every controller, "name" turns one on and
// "-name" turns one off; later entries win. Unknown names are an error, so a typo never silently
// disables a controller.
func (r Registry) Enabled(spec []string) ([]string, error) {
	on := map[string]bool{}
	for _, item := range spec {
		item = strings.TrimSpace(item)
		switch {
		case item == "*":
			for name := range r {
				on[name] = true
			}
		case strings.HasPrefix(item, "-"):
			name := item[1:]
			if _, ok := r[name]; !ok {
				return nil, fmt.Errorf("unknown controller %q in --controllers (known: %s)", name, strings.Join(r.Names(), ", "))
			}
			on[name] = false
		default:
			if _, ok := r[item]; !ok {
				return nil, fmt.Errorf("unknown controller %q in --controllers (known: %s)", item, strings.Join(r.Names(), ", "))
			}
			on[item] = true
		}
	}
	var enabled []string
	for name, ok := range on {
		if ok {
			enabled = append(enabled, name)
		}
	}
	slices.Sort(enabled)
	return enabled, nil
}

// Setup registers the named controllers with the manager.
func (r Registry) Setup(ctx context.Context, mgr mcmanager.Manager, cfg Config, names []string) error {
	for _, name := range names {
		if err := r[name](ctx, mgr, cfg); err != nil {
			return fmt.Errorf("set up controller %s: %w", name, err)
		}
	}
	return nil
}
