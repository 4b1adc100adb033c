package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/test/framework"
)

// The suite's federation settings: short, so a failover takes seconds, yet with room for a
// loaded 2-core machine to renew a 1 s heartbeat well within the fence and grace periods. On real
// nodes the instance manager stops writes 2 s before its primary Lease (fenceAfter from the last
// hub renewal) runs out and reads the Lease every second: with a fenceAfter of 4 s a busy moment
// of 2 s fenced healthy primaries, so it is 8 s, and the grace period follows it.
//
// With DBFLEET_E2E_TIMINGS=defaults the federation runs at the product's defaults instead (what
// `hub run`, `hub join` and a policy without clusterTolerations give): `make bench-failover`
// measures the write gap at both.
var (
	heartbeatInterval  = 1 * time.Second
	fenceAfter         = 8 * time.Second
	clusterGracePeriod = 8 * time.Second
	// toleration is how long the tests' policies tolerate dbfleet.io/unreachable:NoExecute.
	toleration = 5 * time.Second
	// defaultTimings: DBFLEET_E2E_TIMINGS=defaults.
	defaultTimings = os.Getenv("DBFLEET_E2E_TIMINGS") == "defaults"
)

func init() {
	if defaultTimings {
		heartbeatInterval, fenceAfter, clusterGracePeriod = join.DefaultHeartbeatInterval, join.DefaultFenceAfter, 20*time.Second
		toleration = placement.DefaultTolerationSeconds * time.Second
	}
}

// members are the federation's member clusters.
var members = []string{"east", "west", "central"}

// federation is a local federation run by bin/localfed, with admin clients for its clusters.
type federation struct {
	dir      layout.Dir // localfed's state directory
	bin      string     // hub, agent, localfed and k8s/
	hub      client.Client
	clusters map[string]client.Client
	// configs reach the hub ("hub") and each member as admin.
	configs map[string]*rest.Config
	// proxies carry each member's agent to the hub, so a test can cut one off.
	proxies map[string]*framework.Proxy
	// stopped are the components a test stopped and has not started again.
	stopped map[string]bool
	// killed are the members a test killed whole and has not revived: their components, in
	// the order to start them.
	killed map[string][]string
}

// up starts the federation with `localfed up` and routes every agent through a proxy.
func up(bin string, dir layout.Dir) (*federation, error) {
	f := &federation{dir: dir, bin: bin, clusters: map[string]client.Client{}, configs: map[string]*rest.Config{},
		proxies: map[string]*framework.Proxy{}, stopped: map[string]bool{}, killed: map[string][]string{}}
	args := []string{"--bin", bin, "--members", strings.Join(members, ","), "--volumes", "100"}
	if !defaultTimings {
		args = append(args, "--cluster-grace-period", clusterGracePeriod.String(), "--heartbeat-interval", heartbeatInterval.String(),
			"--fence-after", fenceAfter.String())
	}
	err := f.localfed(os.Stdout, "up", args...)
	if err == nil {
		err = f.connect()
	}
	if err == nil {
		err = f.routeAgentsThroughProxies()
	}
	if err != nil {
		return nil, errors.Join(err, f.close(true))
	}
	return f, nil
}

// localfed runs `bin/localfed cmd --dir <dir> args...` from the repository root (it finds the
// CRDs there), writing its output to out.
func (f *federation) localfed(out io.Writer, cmd string, args ...string) error {
	c := exec.Command(filepath.Join(f.bin, "localfed"), append([]string{cmd, "--dir", string(f.dir)}, args...)...)
	c.Dir = framework.RepoRoot()
	c.Stdout, c.Stderr = out, out
	if err := c.Run(); err != nil {
		return fmt.Errorf("localfed %s %s: %w", cmd, strings.Join(args, " "), err)
	}
	return nil
}

// close stops every process of the federation by its pid file (`localfed down`). When the suite
// failed, or DBFLEET_E2E_KEEP_LOGS is set (to read a passing run's timings), it first copies the
// processes' logs and the pods' logs to a directory it prints.
func (f *federation) close(failed bool) error {
	for _, p := range f.proxies {
		p.Close()
	}
	if failed || os.Getenv("DBFLEET_E2E_KEEP_LOGS") != "" {
		if logs, err := os.MkdirTemp("", "dbfleet-e2e-logs-"); err == nil {
			err := os.CopyFS(logs, os.DirFS(f.dir.LogsDir()))
			nodes, _ := filepath.Glob(f.dir.NodeDir("*"))
			for _, n := range nodes {
				podLogs := filepath.Join(n, "pod-logs") // real nodes only
				if _, serr := os.Stat(podLogs); err == nil && serr == nil {
					err = os.CopyFS(filepath.Join(logs, "pods-"+filepath.Base(n)), os.DirFS(podLogs))
				}
			}
			if err == nil {
				fmt.Fprintf(os.Stderr, "e2e: the federation's logs are in %s\n", logs)
			} else {
				fmt.Fprintf(os.Stderr, "e2e: copying the federation's logs to %s: %v\n", logs, err)
			}
		}
	}
	var out bytes.Buffer
	if err := f.localfed(&out, "down"); err != nil {
		return fmt.Errorf("%w\n%s", err, out.String())
	}
	return nil
}

func (f *federation) connect() error {
	var err error
	if f.hub, f.configs[layout.HubCluster], err = newClient(f.dir.Kubeconfig(layout.HubCluster)); err != nil {
		return err
	}
	for _, m := range members {
		if f.clusters[m], f.configs[m], err = newClient(f.dir.Kubeconfig(m)); err != nil {
			return err
		}
	}
	return nil
}

func newClient(kubeconfig string) (client.Client, *rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	// Tests poll; client-go's default 5 QPS would make them wait on the client, not the servers.
	cfg.QPS, cfg.Burst, cfg.Timeout = 200, 400, 15*time.Second
	c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	return c, cfg, err
}

// routeAgentsThroughProxies points each agent's hub kubeconfig at a proxy of the suite and
// restarts the agent with the command localfed recorded, then waits until every agent renews
// its Lease through its proxy.
func (f *federation) routeAgentsThroughProxies() error {
	hubCfg, err := clientcmd.BuildConfigFromFlags("", f.dir.Kubeconfig(layout.HubCluster))
	if err != nil {
		return err
	}
	hubURL, err := url.Parse(hubCfg.Host)
	if err != nil {
		return err
	}
	restarted := time.Now()
	for _, m := range members {
		p, err := framework.StartProxy(hubURL.Host)
		if err != nil {
			return err
		}
		f.proxies[m] = p
		path := f.dir.AgentHubKubeconfig(m)
		kc, err := clientcmd.LoadFromFile(path)
		if err != nil {
			return err
		}
		for _, c := range kc.Clusters {
			c.Server = "https://" + p.Addr()
		}
		if err := clientcmd.WriteToFile(*kc, path); err != nil {
			return err
		}
		var out bytes.Buffer
		if err := f.localfed(&out, "stop", layout.Agent(m)); err != nil {
			return fmt.Errorf("%w\n%s", err, out.String())
		}
		if err := f.localfed(&out, "start", layout.Agent(m)); err != nil {
			return fmt.Errorf("%w\n%s", err, out.String())
		}
	}
	ctx := context.Background()
	return framework.WaitFor(ctx, time.Minute, "every agent renewing through its proxy", func(ctx context.Context) (bool, error) {
		for _, m := range members {
			lease := &coordinationv1.Lease{}
			key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(m), Name: dbfleetv1alpha1.AgentLeaseName}
			if err := f.hub.Get(ctx, key, lease); err != nil {
				return false, err
			}
			if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(restarted) {
				return false, fmt.Errorf("%s has not renewed since its restart", layout.Agent(m))
			}
		}
		return true, f.healthy(ctx)
	})
}

// healthy fails unless every MemberCluster is Ready and carries no taint of the hub's.
func (f *federation) healthy(ctx context.Context) error {
	for _, m := range members {
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := f.hub.Get(ctx, client.ObjectKey{Name: m}, mc); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) {
			return fmt.Errorf("MemberCluster %s is not Ready", m)
		}
		if len(mc.Spec.Taints) > 0 {
			return fmt.Errorf("MemberCluster %s is tainted: %v", m, mc.Spec.Taints)
		}
	}
	return nil
}

// requireHealthy starts a test on a whole federation: every process running, every member
// Ready and untainted (a previous test may have just healed a fault).
func (f *federation) requireHealthy(t *testing.T) {
	t.Helper()
	var out bytes.Buffer
	if err := f.localfed(&out, "status"); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	await(t, time.Minute, "a healthy federation", func(ctx context.Context) (bool, error) {
		return true, f.healthy(ctx)
	})
}

// stop stops a component (e.g. agent-west, hub) by its pid file with `localfed stop`; if the
// test does not start it again, its cleanup does.
func (f *federation) stop(t *testing.T, component string) {
	t.Helper()
	var out bytes.Buffer
	if err := f.localfed(&out, "stop", component); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("localfed stop %s: %s", component, strings.TrimSpace(out.String()))
	if !f.stopped[component] {
		f.stopped[component] = true
		t.Cleanup(func() {
			if f.stopped[component] {
				f.start(t, component)
			}
		})
	}
}

// start starts a component again with `localfed start`, as `localfed up` ran it, with extra
// arguments appended for this run.
func (f *federation) start(t *testing.T, component string, extra ...string) {
	t.Helper()
	var out bytes.Buffer
	if err := f.localfed(&out, "start", append([]string{component}, extra...)...); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	delete(f.stopped, component)
	t.Logf("localfed start %s: %s", component, strings.TrimSpace(out.String()))
}

// kill kills a whole member at once (`localfed kill`); the test's cleanup brings it back if
// the test did not (revive).
func (f *federation) kill(t *testing.T, member string) {
	t.Helper()
	f.killWith(t, member, "kill", member)
}

// killNode kills member's node alone (`localfed kill-node`: its kubelet, containerd and
// containers), its API server and agent running on; revive brings it back, as after kill.
func (f *federation) killNode(t *testing.T, member string) {
	t.Helper()
	f.killWith(t, member, "kill-node", member+"-node-0")
}

// killWith runs `localfed <command> <target>` and records what it says to start again under
// member, for revive and the test's cleanup.
func (f *federation) killWith(t *testing.T, member, command, target string) {
	t.Helper()
	var out bytes.Buffer
	if err := f.localfed(&out, command, target); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var components []string
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "restart: "); ok {
			components = strings.Fields(rest)
		}
	}
	if len(components) == 0 {
		t.Fatalf("localfed %s %s named nothing to restart:\n%s", command, target, out.String())
	}
	t.Logf("localfed %s %s: %s", command, target, strings.TrimSpace(out.String()))
	f.killed[member] = components
	t.Cleanup(func() {
		if _, dead := f.killed[member]; dead {
			f.revive(t, member)
		}
	})
}

// revive starts a killed member's components again, in the order localfed gave.
func (f *federation) revive(t *testing.T, member string) {
	t.Helper()
	for _, c := range f.killed[member] {
		f.start(t, c)
	}
	delete(f.killed, member)
}

// partition cuts a member's agent off the hub (the agent keeps running); the test's cleanup
// heals the link if the test did not.
func (f *federation) partition(t *testing.T, member string) {
	t.Helper()
	f.proxies[member].Partition()
	t.Cleanup(f.proxies[member].Heal)
}

// partitionForReal cuts member off with localfed's iptables rules (its pods from every other
// member's pods, both ways, and its agent from the hub) and its agent's link through the test's
// proxy as well; heal, or the test's end, removes both.
func (f *federation) partitionForReal(t *testing.T, member string) (heal func(t *testing.T)) {
	t.Helper()
	var out bytes.Buffer
	if err := f.localfed(&out, "partition", member); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	f.proxies[member].Partition()
	healed := false
	heal = func(t *testing.T) {
		if healed {
			return
		}
		healed = true
		f.proxies[member].Heal()
		var out bytes.Buffer
		if err := f.localfed(&out, "heal", member); err != nil {
			t.Errorf("%v\n%s", err, out.String())
		}
	}
	t.Cleanup(func() { heal(t) })
	return heal
}

// partitionFrom cuts member's pods from other's pods only (`localfed partition MEMBER --from
// OTHER`), everything else as it was; heal, or the test's end, removes it.
func (f *federation) partitionFrom(t *testing.T, member, other string) (heal func(t *testing.T)) {
	t.Helper()
	var out bytes.Buffer
	if err := f.localfed(&out, "partition", member, "--from", other); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("localfed partition %s --from %s: %s", member, other, strings.TrimSpace(out.String()))
	healed := false
	heal = func(t *testing.T) {
		if healed {
			return
		}
		healed = true
		var out bytes.Buffer
		if err := f.localfed(&out, "heal", member, "--from", other); err != nil {
			t.Errorf("%v\n%s", err, out.String())
		}
	}
	t.Cleanup(func() { heal(t) })
	return heal
}

// membersExcept lists the members but those given.
func membersExcept(skip ...string) []string {
	return slices.DeleteFunc(slices.Clone(members), func(m string) bool { return slices.Contains(skip, m) })
}
