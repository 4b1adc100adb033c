package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/pkg/options"
	"github.com/dbfleet/dbfleet/test/framework"
)

// reservePort holds a 127.0.0.1 port for a process's bind address until the caller releases it,
// right before the process starts.
func reservePort(t *testing.T) *process.Port {
	t.Helper()
	p, err := process.ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Release)
	return p
}

// writeKubeconfig writes kubeconfig to dir/name, its server replaced by server when given.
func writeKubeconfig(t *testing.T, dir, name string, kubeconfig []byte, server string) string {
	t.Helper()
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if server != "" {
		for _, c := range cfg.Clusters {
			c.Server = server
		}
	}
	path := filepath.Join(dir, name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAgentWaitsForTheHub starts the agent binary while neither its hub nor its member cluster's
// API server can be reached (behind partitioned proxies): it must not exit, its readiness probe
// must say it waits for the hub and its metrics that the hub is not reachable; with the hub back
// it goes on waiting for its member's API server (as after a whole member restarted) and says
// so; once both are reachable it starts renewing its Lease and becomes ready. (It used to exit at
// once: "failed to get restmapping", and for the member "failed to get server groups".)
func TestAgentWaitsForTheHub(t *testing.T) {
	const cluster = "latecomer"
	ctx := context.Background()
	dir := t.TempDir()
	if err := framework.Build(dir, "./cmd/agent"); err != nil {
		t.Fatal(err)
	}
	hubURL, err := url.Parse(hub.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := framework.StartProxy(hubURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	proxy.Partition()
	memberURL, err := url.Parse(east.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	memberProxy, err := framework.StartProxy(memberURL.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(memberProxy.Close)
	memberProxy.Partition()

	hubKubeconfig, err := hub.Kubeconfig("agent-"+cluster, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	memberKubeconfig, err := east.Kubeconfig("agent-"+cluster+"-member", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	ns := dbfleetv1alpha1.MemberNamespace(cluster)
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	probe, metrics := reservePort(t), reservePort(t)
	probePort, metricsPort := probe.Number(), metrics.Number()
	var logs bytes.Buffer
	cmd := exec.Command(filepath.Join(dir, "agent"),
		"--hub-kubeconfig", writeKubeconfig(t, dir, "hub.kubeconfig", hubKubeconfig, "https://"+proxy.Addr()),
		"--kubeconfig", writeKubeconfig(t, dir, "member.kubeconfig", memberKubeconfig, "https://"+memberProxy.Addr()),
		"--cluster-name", cluster, "--heartbeat-interval", "1s", "--fence-after", "5s",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	probe.Release()
	metrics.Release()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
		}
		if t.Failed() {
			t.Logf("agent logs:\n%s", logs.String())
		}
	})
	get := func(port int, path string) (int, string, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	alive := func() {
		select {
		case err := <-exited:
			t.Fatalf("the agent exited (%v) instead of waiting for the hub", err)
		default:
		}
	}

	err = framework.WaitFor(ctx, framework.DefaultTimeout, "the agent reporting it waits for the hub", func(context.Context) (bool, error) {
		alive()
		code, body, err := get(probePort, "/readyz")
		if err != nil {
			return false, nil // not listening yet
		}
		if code == http.StatusOK {
			t.Fatalf("/readyz ok while the hub cannot be reached: %s", body)
		}
		if !strings.Contains(body, "waiting for the hub") {
			return false, nil
		}
		_, metrics, err := get(metricsPort, "/metrics")
		return err == nil && strings.Contains(metrics, "dbfleet_agent_hub_reachable 0") &&
			strings.Contains(metrics, `dbfleet_agent_hub_connection_attempts_total{result="error"}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := get(probePort, "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz while waiting for the hub: %d, %v; want 200 (restarting would not help)", code, err)
	}

	// The hub becomes reachable, its member's API server not yet: the agent still waits, and says
	// for what.
	proxy.Heal()
	err = framework.WaitFor(ctx, framework.DefaultTimeout, "the agent reporting it waits for its member's API server", func(context.Context) (bool, error) {
		alive()
		code, body, err := get(probePort, "/readyz")
		return err == nil && code != http.StatusOK && strings.Contains(body, "member cluster's API server at"), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The member's API server becomes reachable: the agent starts, renews its Lease and becomes
	// ready.
	memberProxy.Heal()
	err = framework.WaitFor(ctx, framework.DefaultTimeout, "the agent's Lease renewed and the agent ready", func(ctx context.Context) (bool, error) {
		alive()
		lease := &coordinationv1.Lease{}
		if err := hub.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: dbfleetv1alpha1.AgentLeaseName}, lease); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		code, _, err := get(probePort, "/readyz")
		if err != nil || code != http.StatusOK {
			return false, nil
		}
		_, metrics, err := get(metricsPort, "/metrics")
		return err == nil && strings.Contains(metrics, "dbfleet_agent_hub_reachable 1"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// --concurrent-reconciles (4 by default) reaches the member reconciler itself: the manager
	// took it, multicluster-runtime's builder did not, and the binary ran one worker.
	_, text, err := get(metricsPort, "/metrics")
	if want := fmt.Sprintf(`controller_runtime_max_concurrent_reconciles{controller="memberdatabase"} %d`, options.AgentConcurrentReconciles); err != nil || !strings.Contains(text, want) {
		t.Errorf("the agent's metrics lack %s (%v):\n%s", want, err, grepLines(text, "max_concurrent_reconciles"))
	}
}

// grepLines is the lines of text that contain substr.
func grepLines(text, substr string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
