package scale

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/test/framework"
)

// Simulation says, in every report, what is real and what is simulated.
const Simulation = "hub side real: etcd, the hub kube-apiserver and the `hub run` binary, running as its " +
	"ServiceAccount with deploy/hub's RBAC; each member joined " +
	"with pkg/join (its own ServiceAccount token), running the agent's own reconciler, heartbeat and fence " +
	"code in the harness process with its own hub client and connection, Lease and member-NAME watch; deploy/hub's API Priority and Fairness objects installed; etcd keeps its data on " +
	"tmpfs. Member API servers " +
	"simulated: one in-memory store per member (test/scale/member) whose StatefulSets report every replica " +
	"Ready a fixed delay after each change; no pods, nodes fixed."

// bench is one run in progress.
type bench struct {
	cfg    Config
	report *Report

	env   *framework.Environment
	admin client.Client
	// creator creates the DatabaseClusters as creatorUser.
	creator client.Client
	// metricsGet reads the hub API server's /metrics.
	metricsGet func(context.Context) (families, error)
	hubKC      string // the hub's ServiceAccount (deploy/hub)

	etcdDir       string
	hubBin        string
	hub           *process.Process
	hubMetricsURL string
	hubPprofURL   string
	hubReadyURL   string
	apiPid        int
	etcdPid       int

	settings agentSettings
	agents   fleet
	obs      *observer

	// steadyMCWrites is the MemberCluster write rate of the steady state, per second.
	steadyMCWrites float64

	// profiling is the hub profile download in flight, awaited before the hub stops.
	profiling sync.WaitGroup

	mu        sync.Mutex
	created   map[types.NamespacedName]time.Time
	peakRSS   map[string]int64
	progressT time.Time
}

// Run runs the benchmark and returns its report; everything it started is stopped before it
// returns, also on error or when ctx is cancelled.
func Run(ctx context.Context, cfg Config) (_ *Report, retErr error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	b := &bench{cfg: cfg, created: map[types.NamespacedName]time.Time{}, peakRSS: map[string]int64{}}
	b.report = &Report{Started: time.Now(), Command: cfg.Command, Simulation: Simulation, Machine: machine()}
	b.report.Settings = Settings{
		Clusters: cfg.Clusters, Databases: cfg.Databases, ReadyAfter: cfg.ReadyAfter.Seconds(),
		HeartbeatInterval: cfg.HeartbeatInterval.Seconds(), FenceAfter: cfg.FenceAfter.Seconds(),
		GracePeriod: cfg.GracePeriod.Seconds(), Toleration: unreachableToleration.Seconds(),
		SteadySeconds: cfg.Steady.Seconds(), HubFlags: strings.Join(cfg.HubArgs, " "),
		APIServerFlags: flagString(apiServerFlags(cfg)), APIServerEnv: envString(apiServerEnv(cfg)),
		HarnessGOGC: cfg.HarnessGOGC,
	}
	b.progress("simulation: %s", Simulation)
	if cfg.HarnessGOGC > 0 {
		defer debug.SetGCPercent(debug.SetGCPercent(cfg.HarnessGOGC))
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer b.shutdown()
	// Whatever phase a run ends in, it reports what it measured against the targets.
	defer func() {
		if b.report.Create.Databases > 0 {
			b.report.Machine.LoadAfter = load1()
			b.fillResources()
			b.report.Targets = b.targets()
		}
	}()
	if err := b.startHub(ctx); err != nil {
		return nil, err
	}
	go b.sampleRSS(ctx)
	if err := b.joinClusters(ctx); err != nil {
		return nil, err
	}
	if err := b.createDatabases(ctx); err != nil {
		b.fillResources()
		return b.report, err
	}
	if err := b.check(ctx); err != nil {
		return b.report, err
	}
	if cfg.Steady > 0 {
		if err := b.steady(ctx); err != nil {
			return b.report, err
		}
	}
	if cfg.HubRestart {
		if err := b.restartHub(ctx); err != nil {
			return b.report, err
		}
	}
	if cfg.Failover {
		if err := b.failovers(ctx); err != nil {
			return b.report, err
		}
	}
	return b.report, nil
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.cfg.Progress, "[bench-scale %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// every reports whether d has passed since the last periodic progress line.
func (b *bench) every(d time.Duration) bool {
	if time.Since(b.progressT) < d {
		return false
	}
	b.progressT = time.Now()
	return true
}

// pollInterval is how often the harness's waits look: every look at the fleet lists up to
// thousands of objects, which the figures would otherwise count.
const pollInterval = 200 * time.Millisecond

// waitFor polls cond every pollInterval until it holds, fails (an error from cond ends the wait),
// or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	return process.Wait(ctx, what, timeout, func(context.Context) error {
		ok, err := cond()
		if err != nil {
			return process.Permanent(err)
		}
		if !ok {
			return process.ErrNotReady
		}
		return nil
	}, process.Interval(pollInterval))
}

// shutdown stops the agents, the hub and the API server, in that order.
func (b *bench) shutdown() {
	b.profiling.Wait()
	b.progress("stopping %d agents, the hub and the hub API server", len(b.agents.all()))
	b.agents.stopAll()
	b.stopHub(20 * time.Second)
	if b.env != nil {
		if err := b.env.Stop(); err != nil {
			b.progress("stop: %v", err)
		}
	}
	if b.etcdDir != "" {
		_ = os.RemoveAll(b.etcdDir)
	}
}
