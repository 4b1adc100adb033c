package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/pkg/scheme"
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

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: load1()}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
				m.MemoryGiB = round(kb / 1024 / 1024)
			}
		}
	}
	return m
}

func load1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	return v
}

// startHub starts etcd and the hub API server (envtest, CRDs installed), builds and starts
// `hub run`, and waits until it is ready.
func (b *bench) startHub(ctx context.Context) error {
	// etcd on tmpfs: a shared VM disk's fsync latency (hundreds of ms here while others build)
	// would be all the benchmark measured.
	etcdDir, err := os.MkdirTemp(etcdParent(), "dbfleet-bench-etcd-")
	if err != nil {
		return err
	}
	b.etcdDir = etcdDir
	b.progress("starting etcd (data in %s) and the hub kube-apiserver", etcdDir)
	var env *framework.Environment
	err = withEnv(apiServerEnv(b.cfg), func() (err error) {
		env, err = framework.StartHubWithEtcdDir(etcdDir, apiServerFlags(b.cfg))
		return err
	})
	if err != nil {
		return err
	}
	b.env = env
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // the harness's own requests are not what is measured: no client-side limit
	if b.admin, err = client.New(cfg, client.Options{Scheme: framework.Scheme}); err != nil {
		return err
	}
	// The agents' Lease renewals get their own priority level, as with deploy/hub installed.
	if err := applyDeployHub(ctx, b.admin, "flowcontrol.yaml"); err != nil {
		return err
	}
	if b.creator, err = b.newCreator(ctx); err != nil {
		return err
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	host := strings.TrimSuffix(cfg.Host, "/")
	b.metricsGet = func(ctx context.Context) (families, error) {
		return httpMetricsWith(ctx, httpClient, host+"/metrics")
	}
	port := host[strings.LastIndex(host, ":")+1:]
	if b.apiPid, err = findProcess("kube-apiserver", "--secure-port="+port); err != nil {
		return err
	}
	if b.etcdPid, err = etcdOf(b.apiPid); err != nil {
		return err
	}
	kc, err := env.Kubeconfig("bench-admin", "system:masters")
	if err != nil {
		return err
	}
	// For looking around while a run goes on (kubectl --kubeconfig ...).
	if err := os.WriteFile(filepath.Join(b.cfg.WorkDir, "hub-admin.kubeconfig"), kc, 0o600); err != nil {
		return err
	}
	if kc, err = b.hubKubeconfig(ctx); err != nil {
		return err
	}
	b.hubKC = filepath.Join(b.cfg.WorkDir, "hub.kubeconfig")
	if err := os.WriteFile(b.hubKC, kc, 0o600); err != nil {
		return err
	}
	b.hubBin = b.cfg.HubBinary
	if b.hubBin == "" {
		b.hubBin = filepath.Join(b.cfg.WorkDir, "hub")
		b.progress("building %s", b.hubBin)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.hubBin, "./cmd/hub")
		cmd.Dir = framework.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build hub: %w\n%s", err, out)
		}
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return err
	}
	b.settings = agentSettings{
		scheme: scheme.New(), mapper: mapper, heartbeatInterval: b.cfg.HeartbeatInterval,
		fenceAfter: b.cfg.FenceAfter, readyAfter: b.cfg.ReadyAfter,
	}
	return b.runHub(ctx, "hub.log")
}

// apiServerFlags are the hub API server's flags the configuration sets.
func apiServerFlags(cfg Config) map[string]string {
	flags := map[string]string{}
	if cfg.MaxRequestsInflight > 0 {
		flags["max-requests-inflight"] = strconv.Itoa(cfg.MaxRequestsInflight)
	}
	if cfg.MaxMutatingRequestsInflight > 0 {
		flags["max-mutating-requests-inflight"] = strconv.Itoa(cfg.MaxMutatingRequestsInflight)
	}
	return flags
}

// apiServerEnv is the environment the hub API server and its etcd start with.
func apiServerEnv(cfg Config) map[string]string {
	env := map[string]string{}
	if cfg.APIServerGOGC > 0 {
		env["GOGC"] = strconv.Itoa(cfg.APIServerGOGC)
	}
	if cfg.APIServerMemoryLimit != "" {
		env["GOMEMLIMIT"] = cfg.APIServerMemoryLimit
	}
	return env
}

// withEnv runs fn with vars set in the process environment, which the processes fn starts
// inherit (envtest has no per-process environment), and restores the environment afterwards so
// that `hub run`, started later, keeps Go's defaults.
func withEnv(vars map[string]string, fn func() error) error {
	for k, v := range vars {
		old, had := os.LookupEnv(k)
		if err := os.Setenv(k, v); err != nil {
			return err
		}
		defer func() {
			if had {
				_ = os.Setenv(k, old)
			} else {
				_ = os.Unsetenv(k)
			}
		}()
	}
	return fn()
}

// envString renders environment variables as a shell would take them, sorted.
func envString(env map[string]string) string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return strings.Join(out, " ")
}

// flagString renders flags as a command line would, sorted.
func flagString(flags map[string]string) string {
	out := make([]string, 0, len(flags))
	for _, k := range slices.Sorted(maps.Keys(flags)) {
		out = append(out, "--"+k+"="+flags[k])
	}
	return strings.Join(out, " ")
}

// creatorUser creates the DatabaseClusters. It is an ordinary user, as a platform team's
// pipeline would be: not system:masters, so API Priority and Fairness classifies its requests
// (global-default) instead of exempting them, and the creation burst cannot crowd out the
// agents' Lease renewals.
const creatorUser = "dbfleet-bench-creator"

// newCreator grants creatorUser what creating DatabaseClusters takes and returns its client.
func (b *bench) newCreator(ctx context.Context) (client.Client, error) {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: creatorUser},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{dbfleetv1alpha1.GroupVersion.Group},
			Resources: []string{"databaseclusters"}, Verbs: []string{"create", "get", "list", "watch"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: creatorUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: creatorUser},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: creatorUser}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := b.admin.Create(ctx, obj); err != nil {
			return nil, fmt.Errorf("grant %s: %w", creatorUser, err)
		}
	}
	cfg, err := b.env.UserConfig(creatorUser)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 0
	return client.New(cfg, client.Options{Scheme: framework.Scheme})
}

// applyDeployHub creates the objects of the given deploy/hub files, as a user installing the hub
// with deploy/hub would; objects that exist already are left as they are.
func applyDeployHub(ctx context.Context, c client.Client, files ...string) error {
	for _, name := range files {
		objs, err := framework.ReadObjects(filepath.Join(framework.RepoRoot(), "deploy", "hub", name))
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// etcdOf finds the etcd serving the API server pid.
func etcdOf(apiPid int) (int, error) {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", apiPid))
	if err != nil {
		return 0, err
	}
	for _, arg := range strings.Split(string(cmdline), "\x00") {
		if url, ok := strings.CutPrefix(arg, "--etcd-servers="); ok {
			return findProcess("etcd", strings.Split(url, ",")[0])
		}
	}
	return 0, errors.New("the hub API server names no --etcd-servers")
}

// runHub starts `hub run` with its metrics, probes and pprof on fresh ports (others when one
// was taken) and waits for its readiness endpoint.
func (b *bench) runHub(ctx context.Context, logName string) error {
	return process.RetryOnPortConflict(3, func() error {
		ports, err := process.ReservePorts(3)
		if err != nil {
			return err
		}
		metricsAddr, probeAddr, pprofAddr := ports[0].Addr(), ports[1].Addr(), ports[2].Addr()
		args := append([]string{b.hubBin, "run", "--kubeconfig", b.hubKC, "--leader-elect=false",
			"--metrics-bind-address", metricsAddr, "--health-probe-bind-address", probeAddr,
			"--pprof-bind-address", pprofAddr, "--cluster-grace-period", b.cfg.GracePeriod.String()}, b.cfg.HubArgs...)
		b.hubMetricsURL = "http://" + metricsAddr + "/metrics"
		b.hubPprofURL = "http://" + pprofAddr + "/debug/pprof"
		b.hubReadyURL = "http://" + probeAddr + "/readyz"
		b.progress("starting %s", strings.Join(args, " "))
		if b.hub, err = process.Start(process.Spec{Name: "hub", Args: args, Ports: ports,
			LogFile: filepath.Join(b.cfg.WorkDir, logName)}); err != nil {
			return err
		}
		return b.hub.WaitReady(ctx, "hub ready", time.Minute, process.HTTPOK(b.hubReadyURL), process.Interval(pollInterval))
	})
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

// stopHub stops `hub run` (SIGTERM, SIGKILL after grace) and waits for it.
func (b *bench) stopHub(grace time.Duration) {
	if b.hub == nil {
		return
	}
	if _, err := b.hub.Stop(grace); err != nil {
		b.progress("stop hub: %v", err)
	}
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

// etcdParent is tmpfs when the machine has it.
func etcdParent() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// sampleRSS keeps the peak resident memory of each process.
func (b *bench) sampleRSS(ctx context.Context) {
	for {
		for name, pid := range b.pids() {
			if s, err := sampleProc(pid); err == nil {
				b.mu.Lock()
				b.peakRSS[name] = max(b.peakRSS[name], s.RSS)
				b.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// Process names in the report.
const (
	procHub       = "hub (hub run)"
	procAPIServer = "hub kube-apiserver"
	procEtcd      = "etcd"
	procHarness   = "harness (agents + simulated members)"
)

func (b *bench) pids() map[string]int {
	m := map[string]int{procAPIServer: b.apiPid, procEtcd: b.etcdPid, procHarness: os.Getpid()}
	if b.hub != nil {
		if exited, _ := b.hub.Exited(); !exited {
			m[procHub] = b.hub.Pid()
		}
	}
	return m
}

// cpuSnapshot samples every process's CPU time.
func (b *bench) cpuSnapshot() map[string]procSample {
	out := map[string]procSample{}
	for name, pid := range b.pids() {
		if s, err := sampleProc(pid); err == nil {
			out[name] = s
		}
	}
	return out
}

func cores(before, after map[string]procSample, name string) (cpu time.Duration, avg float64) {
	a, okA := after[name]
	s, okB := before[name]
	if !okA || !okB || !a.At.After(s.At) {
		return 0, 0
	}
	cpu = a.CPU - s.CPU
	return cpu, round(cpu.Seconds() / a.At.Sub(s.At).Seconds())
}

// joinClusters joins every cluster with pkg/join, starts its agent, and waits until the hub
// sees them all Ready.
func (b *bench) joinClusters(ctx context.Context) error {
	ep, err := join.HubEndpointFromConfig(b.env.Config)
	if err != nil {
		return err
	}
	b.progress("joining %d clusters (hub join as a library) and starting their agents", b.cfg.Clusters)
	start := time.Now()
	var joined atomic.Int64
	work := make(chan int)
	errs := make(chan error, b.cfg.Clusters)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if err := b.joinOne(ctx, ep, i); err != nil {
					errs <- err
					continue
				}
				joined.Add(1)
			}
		})
	}
	go func() {
		for range time.Tick(5 * time.Second) {
			if n := joined.Load(); n < int64(b.cfg.Clusters) && ctx.Err() == nil {
				b.progress("joined %d/%d", n, b.cfg.Clusters)
			} else {
				return
			}
		}
	}()
	for i := range b.cfg.Clusters {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	b.report.Join = JoinFigures{Clusters: b.cfg.Clusters, JoinSeconds: round(time.Since(start).Seconds())}
	b.progress("joined %d clusters in %.1f s; waiting for all to be Ready", b.cfg.Clusters, b.report.Join.JoinSeconds)
	err = waitFor(ctx, 5*time.Minute+time.Duration(b.cfg.Clusters)*200*time.Millisecond, "every MemberCluster Ready", func() (bool, error) {
		list := &dbfleetv1alpha1.MemberClusterList{}
		if err := b.admin.List(ctx, list); err != nil {
			return false, err
		}
		ready := 0
		for i := range list.Items {
			if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, dbfleetv1alpha1.ConditionReady) {
				ready++
			}
		}
		if b.every(5 * time.Second) {
			b.progress("%d/%d MemberClusters Ready", ready, b.cfg.Clusters)
		}
		return ready == b.cfg.Clusters, nil
	})
	b.report.Join.ReadySeconds = round(time.Since(start).Seconds())
	if err == nil {
		b.progress("all %d clusters Ready %.1f s after the first join", b.cfg.Clusters, b.report.Join.ReadySeconds)
	}
	return err
}

func (b *bench) joinOne(ctx context.Context, ep join.HubEndpoint, i int) error {
	name := clusterName(i)
	o := join.NewOptions(name)
	o.Region, o.Zone = regionOf(i), regionOf(i)+"-a"
	o.Labels = map[string]string{labelGroup: groupName(groupOf(i))}
	o.HeartbeatInterval, o.FenceAfter = b.cfg.HeartbeatInterval, b.cfg.FenceAfter
	res, err := join.Join(ctx, b.admin, ep, o)
	if err != nil {
		return fmt.Errorf("join %s: %w", name, err)
	}
	a, err := startAgent(ctx, &b.settings, name, res.HubKubeconfig)
	if err != nil {
		return err
	}
	b.agents.add(a)
	return nil
}

// createDatabases creates the policies and the databases, and waits until all are Available.
func (b *bench) createDatabases(ctx context.Context) error {
	ng := groups(b.cfg.Clusters)
	for g := range ng {
		var members []string
		for i := g * groupSize; i < min((g+1)*groupSize, b.cfg.Clusters); i++ {
			members = append(members, clusterName(i))
		}
		for _, p := range policies(g, members) {
			if err := client.IgnoreAlreadyExists(b.admin.Create(ctx, p)); err != nil {
				return fmt.Errorf("create ClusterPropagationPolicy %s: %w", p.Name, err)
			}
		}
	}
	if err := createNamespaces(ctx, b.admin); err != nil {
		return err
	}
	var err error
	if b.obs, err = startObserver(ctx, b.env.Config, cache.Options{Scheme: framework.Scheme}); err != nil {
		return err
	}
	b.progress("created %d ClusterPropagationPolicies (4 kinds in each of %d groups); creating %d DatabaseClusters", 4*ng, ng, b.cfg.Databases)

	metricsBefore, err := b.metricsGet(ctx)
	if err != nil {
		return err
	}
	cpuBefore := b.cpuSnapshot()
	lapsedBefore, unheardBefore := b.clustersLapsed(ctx)
	agentsBefore := agentCounts()
	stopProfiles := b.startProfiles(ctx)
	first := time.Now()
	var last atomic.Int64
	var createdN atomic.Int64
	work := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				dbc := database(i, ng)
				if err := b.creator.Create(ctx, dbc); err != nil {
					select {
					case errs <- fmt.Errorf("create DatabaseCluster %s/%s: %w", dbc.Namespace, dbc.Name, err):
					default:
					}
					continue
				}
				now := time.Now()
				b.mu.Lock()
				b.created[types.NamespacedName{Namespace: dbc.Namespace, Name: dbc.Name}] = now
				b.mu.Unlock()
				last.Store(now.UnixNano())
				createdN.Add(1)
			}
		})
	}
	produceErr := func() error {
		defer func() { close(work); wg.Wait() }()
		for i := range b.cfg.Databases {
			select {
			case work <- i:
			case err := <-errs:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
			if b.every(5 * time.Second) {
				b.createProgress(int(createdN.Load()))
			}
		}
		return nil
	}()
	if produceErr == nil {
		select {
		case produceErr = <-errs:
		default:
		}
	}
	if produceErr != nil {
		stopProfiles()
		return produceErr
	}
	lastCreate := time.Unix(0, last.Load())
	b.progress("created %d DatabaseClusters in %.1f s; waiting for all to be Available", b.cfg.Databases, lastCreate.Sub(first).Seconds())
	err = waitFor(ctx, b.cfg.Timeout, "every DatabaseCluster Available", func() (bool, error) {
		_, _, available := b.obs.counts()
		if b.every(5 * time.Second) {
			b.createProgress(b.cfg.Databases)
		}
		return available == b.cfg.Databases, nil
	})
	stopProfiles()
	allAvailable := time.Now()
	// Read the figures even when ctx was cancelled: a stopped run still reports what it saw.
	metricsAfter, merr := b.metricsGet(context.WithoutCancel(ctx))
	cpuAfter := b.cpuSnapshot()
	b.fillCreate(first, lastCreate, allAvailable, metricsBefore, metricsAfter, merr)
	b.report.Create.Agents = agentCounts().since(agentsBefore)
	lapsed, unheard := b.clustersLapsed(context.WithoutCancel(ctx))
	b.report.Create.ClustersLapsed, b.report.Create.UnheardRenewals = lapsed-lapsedBefore, unheard-unheardBefore
	for _, name := range []string{procHub, procAPIServer, procEtcd, procHarness} {
		cpu, avg := cores(cpuBefore, cpuAfter, name)
		b.report.Resources = append(b.report.Resources, ProcessUsage{Process: name, CreateCPU: round(cpu.Seconds()), CreateCores: avg})
	}
	if err != nil {
		return err
	}
	c := b.report.Create
	b.progress("all %d Available %.1f s after the last create; created → Available p50 %.2f s, p99 %.2f s",
		b.cfg.Databases, c.AfterLast, c.Available.P50, c.Available.P99)
	return nil
}

func (b *bench) createProgress(created int) {
	s, p, a := b.obs.counts()
	hub := b.cpuSnapshot()[procHub]
	lapsed, unheard := b.clustersLapsed(context.Background())
	b.progress("databases: %d created, %d Scheduled, %d MemberDatabases written, %d Available | hub RSS %d MiB, %d cluster lapses so far (%d silences not confirmed)",
		created, s, p, a, hub.RSS>>20, lapsed, unheard)
}

// clustersLapsed is how many times the hub has marked a cluster Ready=Unknown (its failure
// detection histogram's count), and how many silences it did not act on because a read of the
// Lease found a renewal its watch had not delivered; zeros when the hub cannot be read.
func (b *bench) clustersLapsed(ctx context.Context) (lapsed, unheard int) {
	m, err := httpMetrics(ctx, b.hubMetricsURL)
	if err != nil {
		return 0, 0
	}
	return int(m.observations("dbfleet_hub_cluster_failure_detection_seconds")),
		int(m.sum("dbfleet_hub_lease_silence_checks_total", map[string]string{"result": "renewed"}))
}

// startProfiles takes CPU profiles of the hub (its pprof endpoint) and of the harness for up to
// 60 s from now; the returned func stops the harness profile early.
func (b *bench) startProfiles(ctx context.Context) (stop func()) {
	if !b.cfg.Profile {
		return func() {}
	}
	const seconds = 30
	hubPath := filepath.Join(b.cfg.WorkDir, "hub-cpu.pprof")
	b.profiling.Add(1)
	go func() {
		defer b.profiling.Done()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/profile?seconds=%d", b.hubPprofURL, seconds), nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.progress("hub profile: %v", err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		f, err := os.Create(hubPath)
		if err != nil {
			return
		}
		defer func() { _ = f.Close() }()
		_, _ = io.Copy(f, resp.Body)
	}()
	b.report.Profiles = append(b.report.Profiles, hubPath)
	stop = b.profileHarness("harness-cpu.pprof")
	time.AfterFunc(seconds*time.Second, stop)
	return stop
}

// profileHarness starts a CPU profile of the harness process into name; the returned func
// stops it (once).
func (b *bench) profileHarness(name string) (stop func()) {
	if !b.cfg.Profile {
		return func() {}
	}
	path := filepath.Join(b.cfg.WorkDir, name)
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return func() {}
	}
	b.report.Profiles = append(b.report.Profiles, path)
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}
}

func (b *bench) fillCreate(first, lastCreate, allAvailable time.Time, before, after families, merr error) {
	var sched, prop, avail []float64
	var lastSched, lastProp, lastAvail time.Time
	b.mu.Lock()
	for k, created := range b.created {
		s := b.obs.stagesOf(k)
		if !s.scheduled.IsZero() {
			sched = append(sched, s.scheduled.Sub(created).Seconds())
			lastSched = latest(lastSched, s.scheduled)
		}
		if !s.propagated.IsZero() {
			prop = append(prop, s.propagated.Sub(created).Seconds())
			lastProp = latest(lastProp, s.propagated)
		}
		if !s.available.IsZero() {
			avail = append(avail, s.available.Sub(created).Seconds())
			lastAvail = latest(lastAvail, s.available)
		}
	}
	b.mu.Unlock()
	perSecond := func(n int, until time.Time) float64 {
		if until.IsZero() || !until.After(first) {
			return 0
		}
		return round(float64(n) / until.Sub(first).Seconds())
	}
	for i := range avail {
		avail[i] = max(avail[i], 0)
	}
	h, width := histogram(avail)
	c := CreateFigures{
		Databases: b.cfg.Databases, CreateSeconds: round(lastCreate.Sub(first).Seconds()),
		AllAvailableAt: round(allAvailable.Sub(first).Seconds()), AfterLast: round(allAvailable.Sub(lastCreate).Seconds()),
		ScheduledPerSecond: perSecond(len(sched), lastSched), PropagatedPerSecond: perSecond(len(prop), lastProp),
		AvailablePerSecond: perSecond(len(avail), lastAvail),
		Scheduled:          percentiles(sched), Propagated: percentiles(prop), Available: percentiles(avail),
		Histogram: h, HistogramBucketSeconds: width, AvailableCount: len(avail),
	}
	if merr == nil {
		d := allAvailable.Sub(first)
		c.Requests = rates(before.requests(), after.requests(), d)
		c.RequestsPerSecond = round(total(c.Requests) / d.Seconds())
		c.WatchesClosed = closedWatches(before, after)
	}
	b.report.Create = c
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func total(rs []RequestRate) float64 {
	var n float64
	for _, r := range rs {
		n += float64(r.Count)
	}
	return n
}

func (b *bench) fillResources() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.report.Resources {
		b.report.Resources[i].PeakRSS = b.peakRSS[b.report.Resources[i].Process] >> 20
	}
}
