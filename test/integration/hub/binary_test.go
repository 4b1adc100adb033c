package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestHubRunBinary builds cmd/hub and runs `hub run` as a user would: it must serve probes and
// metrics, place a DatabaseCluster, and exit cleanly on SIGTERM.
func TestHubRunBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "hub")
	build := exec.Command("go", "build", "-o", bin, "./cmd/hub")
	build.Dir = framework.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/hub: %v\n%s", err, out)
	}
	kubeconfig, err := env.Kubeconfig("hub-admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(dir, "hub.kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	// Bad flags fail at start-up with a message naming the flag.
	out, err := exec.Command(bin, "run", "--kubeconfig", kcPath, "--controllers=*,-nope").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `unknown controller "nope"`) {
		t.Errorf("hub run with an unknown controller: err=%v output=%s", err, out)
	}

	// The ports stay reserved until hub run starts, so no other test's server takes them first.
	ports, err := process.ReservePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	metricsPort, probePort := ports[0].Number(), ports[1].Number()
	hub, err := process.Start(process.Spec{Name: "hub run", Ports: ports, LogFile: filepath.Join(dir, "hub.log"),
		Args: []string{bin, "run", "--kubeconfig", kcPath, "--leader-elect=false",
			fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = hub.Stop(framework.DefaultTimeout)
		if t.Failed() {
			t.Logf("hub logs:\n%s", hub.Output())
		}
	})

	ctx := context.Background()
	get := func(port int, path string) (string, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", resp.Status, body)
		}
		return string(body), nil
	}
	if err := hub.WaitReady(ctx, "/readyz", framework.DefaultTimeout, func(context.Context) error {
		_, err := get(probePort, "/readyz")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := get(probePort, "/healthz"); err != nil {
		t.Errorf("/healthz: %v", err)
	}

	f := newFixture(t)
	a := f.member("a", "r1", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 3, map[string]string{"app": "orders"})
	f.waitMemberDatabases("orders", map[string]int32{a: 3})

	// hub plan reads the same fleet from the live hub and agrees with what the hub did.
	planOut, err := exec.Command(bin, "plan", "--kubeconfig", kcPath, "-n", f.ns).CombinedOutput()
	if err != nil || !strings.Contains(string(planOut), "DatabaseCluster "+f.ns+"/orders: 3 replicas") ||
		!strings.Contains(string(planOut), a) {
		t.Errorf("hub plan --kubeconfig: err=%v\n%s", err, planOut)
	}

	metrics, err := get(metricsPort, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dbfleet_hub_scheduling_duration_seconds", "dbfleet_hub_placement_decisions_total",
		"dbfleet_hub_memberdatabase_writes_total", "dbfleet_databasecluster_ready_replicas"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	stopped, err := hub.Stop(framework.DefaultTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if _, exitErr := hub.Exited(); stopped.Killed || exitErr != nil {
		t.Errorf("hub run after SIGTERM: %s, exit %v; want it to exit with status 0 within %s", stopped, exitErr, framework.DefaultTimeout)
	}
}
