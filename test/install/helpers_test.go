package install

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/test/framework"
)

// localfedOrFail runs `localfed cmd component` (stop or start, by pid file).
func localfedOrFail(t *testing.T, cmd, component string) {
	t.Helper()
	var out bytes.Buffer
	if err := localfed(&out, cmd, component); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("localfed %s %s", cmd, component)
}

func chart(name string) string { return filepath.Join(framework.ChartsDir(), name) }

func helm(t *testing.T, args ...string) {
	t.Helper()
	if _, err := framework.RunHelm(args...); err != nil {
		t.Fatal(err)
	}
}

func newClient(t *testing.T, cluster string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", fed.Kubeconfig(cluster))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = 100, 200, 15*time.Second
	c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ctr runs containerd's client against the hub node's containerd, in the CRI's namespace.
func ctr(socket string, args ...string) ([]byte, error) {
	return exec.Command("ctr", append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

// await polls cond until it holds, failing the test after timeout with the last error; every
// 15 s it logs what it still waits for (a long step shows progress).
func await(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	start, last := time.Now(), time.Now()
	err := framework.WaitFor(context.Background(), timeout, what, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if !ok && time.Since(last) > 15*time.Second {
			last = time.Now()
			t.Logf("still waiting for %s (%s): %v", what, time.Since(start).Round(time.Second), err)
		}
		return ok, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stopwatch logs each step's time since the previous one and since the start.
type stopwatch struct {
	t           *testing.T
	start, last time.Time
}

func newStopwatch(t *testing.T) *stopwatch {
	now := time.Now()
	return &stopwatch{t: t, start: now, last: now}
}

func (s *stopwatch) lap(what string) {
	s.t.Helper()
	now := time.Now()
	s.t.Logf("FIGURE %s: %s (%s since the start)", what, now.Sub(s.last).Round(100*time.Millisecond), now.Sub(s.start).Round(100*time.Millisecond))
	s.last = now
}
