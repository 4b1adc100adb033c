package scale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/pkg/scheme"
	"github.com/dbfleet/dbfleet/test/framework"
)

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

// stopHub stops `hub run` (SIGTERM, SIGKILL after grace) and waits for it.
func (b *bench) stopHub(grace time.Duration) {
	if b.hub == nil {
		return
	}
	if _, err := b.hub.Stop(grace); err != nil {
		b.progress("stop hub: %v", err)
	}
}

// etcdParent is tmpfs when the machine has it.
func etcdParent() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return ""
}
