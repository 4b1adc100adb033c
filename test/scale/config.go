package scale

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/dbfleet/dbfleet/pkg/placement"
)

// Config says what to run.
type Config struct {
	Clusters  int
	Databases int
	// ReadyAfter is how long a simulated StatefulSet takes to report its replicas Ready.
	ReadyAfter time.Duration
	// Steady is how long the fleet is watched, untouched, once everything is Available; zero
	// skips the steady-state figures.
	Steady time.Duration
	// HubRestart measures a hub restart after the steady state.
	HubRestart bool
	// Failover cuts one cluster, then FailoverFraction of the clusters, off the hub.
	Failover         bool
	FailoverFraction float64
	// Timeout bounds waiting for all databases to become Available.
	Timeout time.Duration

	HeartbeatInterval, FenceAfter, GracePeriod time.Duration
	// MaxRequestsInflight and MaxMutatingRequestsInflight are the hub API server's limits, and so
	// its API Priority and Fairness seats (their sum); zero keeps kube-apiserver's defaults (400 and
	// 200), which the runs use. Sized down to this machine (40 and 20), the renewals' level got 4
	// to 18 seats: at the ~80 ms a Lease write then took, too few for 200 renewals a second, and
	// clusters lapsed; workload-low's 2 seats starved the agents' status reports.
	MaxRequestsInflight, MaxMutatingRequestsInflight int
	// APIServerGOGC and APIServerMemoryLimit are the hub API server's (and its etcd's) GOGC and
	// GOMEMLIMIT; zero and empty keep Go's defaults (100, none). At 10,000 databases the API
	// server's garbage collector took 22 to 40 % of its CPU on this 2-core machine, which has
	// memory to spare: GOGC 300 trades memory for CPU, GOMEMLIMIT bounds the trade.
	APIServerGOGC        int
	APIServerMemoryLimit string
	// HarnessGOGC is this process's GOGC while it runs (it hosts every agent and simulated
	// member); zero keeps the current setting. At rest with 3,000 primaries, garbage collection
	// was a quarter of the harness's CPU, which the hub API server on the same two cores needs.
	HarnessGOGC int
	// HubArgs are extra flags for `hub run`.
	HubArgs []string
	// HubBinary is the `hub` binary; empty builds ./cmd/hub into WorkDir.
	HubBinary string
	// WorkDir holds logs, kubeconfigs and profiles.
	WorkDir string
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
	// Profile takes CPU profiles of the hub and of the harness while the databases are created.
	Profile bool
	// Command is recorded in the report.
	Command string
}

// DefaultConfig is the run: 1,000 clusters, 10,000 databases.
func DefaultConfig() Config {
	return Config{
		Clusters: 1000, Databases: 10000,
		ReadyAfter:       time.Second,
		Steady:           5 * time.Minute,
		HubRestart:       true,
		Failover:         true,
		FailoverFraction: 0.1,
		// 10,000 databases were all Available 15–25 minutes after the last create on a 2-core
		// machine (a whole run takes about 50 minutes; docs/performance.md).
		Timeout: 90 * time.Minute,
		// The design's defaults.
		HeartbeatInterval:    5 * time.Second,
		FenceAfter:           15 * time.Second,
		GracePeriod:          20 * time.Second,
		Profile:              true,
		APIServerGOGC:        300,
		APIServerMemoryLimit: "12GiB",
		HarnessGOGC:          400,
	}
}

// memoryLimitPattern is what Go's runtime accepts in GOMEMLIMIT (it refuses to start otherwise).
var memoryLimitPattern = regexp.MustCompile(`^[0-9]+(B|KiB|MiB|GiB|TiB)?$`)

// unreachableToleration is the hub's default toleration of dbfleet.io/unreachable.
const unreachableToleration = placement.DefaultTolerationSeconds * time.Second

func (c *Config) validate() error {
	var errs []error
	if c.Clusters < 3 {
		errs = append(errs, fmt.Errorf("clusters must be at least 3, got %d", c.Clusters))
	}
	if c.MaxRequestsInflight < 0 || c.MaxMutatingRequestsInflight < 0 {
		errs = append(errs, fmt.Errorf("API server inflight limits must not be negative, got %d and %d", c.MaxRequestsInflight, c.MaxMutatingRequestsInflight))
	}
	if c.APIServerGOGC < 0 {
		errs = append(errs, fmt.Errorf("API server GOGC must not be negative, got %d", c.APIServerGOGC))
	}
	if c.HarnessGOGC < 0 {
		errs = append(errs, fmt.Errorf("harness GOGC must not be negative, got %d", c.HarnessGOGC))
	}
	if c.APIServerMemoryLimit != "" && !memoryLimitPattern.MatchString(c.APIServerMemoryLimit) {
		errs = append(errs, fmt.Errorf("API server memory limit %q is not a GOMEMLIMIT value such as 12GiB", c.APIServerMemoryLimit))
	}
	if c.Databases < 1 {
		errs = append(errs, fmt.Errorf("databases must be at least 1, got %d", c.Databases))
	}
	if c.WorkDir == "" {
		errs = append(errs, errors.New("a work directory is required"))
	}
	if c.FenceAfter <= c.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("fenceAfter %s must exceed the heartbeat interval %s", c.FenceAfter, c.HeartbeatInterval))
	}
	return errors.Join(errs...)
}
