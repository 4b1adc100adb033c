package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/test/framework"
)

// fed is the suite's federation, brought up once in TestMain.
var fed *federation

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping the e2e suite in -short mode: it runs a local federation")
		os.Exit(0)
	}
	framework.QuietLogs()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	work, err := os.MkdirTemp("", "dbfleet-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var (
		once    sync.Once
		leftErr error
	)
	// teardown stops the federation; `localfed down` fails when anything of it is left (a
	// process, a shim, a mount, a network namespace, a bridge, an iptables rule), and so does
	// the suite then.
	teardown := func(failed bool) error {
		once.Do(func() {
			if fed != nil {
				if leftErr = fed.close(failed); leftErr != nil {
					fmt.Fprintf(os.Stderr, "e2e: %v; %s kept: stop what is left with `localfed down --dir %s`\n", leftErr, work, fed.dir)
					return
				}
			}
			_ = os.RemoveAll(work)
		})
		return leftErr
	}
	code := 1
	defer func() { _ = teardown(code != 0) }()
	// The federation's processes run detached, so a test binary that dies leaves them running:
	// an interrupt, or the test timeout about to fire, stops them by their pid files first.
	stopOn := make(chan os.Signal, 1)
	signal.Notify(stopOn, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-stopOn
		fmt.Fprintf(os.Stderr, "e2e: %v: stopping the local federation\n", sig)
		_ = teardown(true)
		os.Exit(1)
	}()

	start := time.Now()
	bin := filepath.Join(work, "bin")
	if err := buildBinaries(bin); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("e2e: built hub, agent and localfed in %s\n", time.Since(start).Round(100*time.Millisecond))
	if fed, err = up(bin, layout.Dir(filepath.Join(work, "fed"))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("e2e: local federation up in %s (state in %s)\n", time.Since(start).Round(100*time.Millisecond), fed.dir)

	if timeout := flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration); timeout > 2*time.Minute {
		// Stop the federation shortly before `go test` kills the binary at its -timeout.
		watchdog := time.AfterFunc(timeout-time.Minute, func() {
			fmt.Fprintf(os.Stderr, "e2e: the -timeout of %s is about to expire: stopping the local federation\n", timeout)
			_ = teardown(true)
		})
		defer watchdog.Stop()
	}
	code = m.Run()
	if err := teardown(code != 0); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: FAIL: the local federation did not come down cleanly")
		code = 1
	}
	return code
}

// buildBinaries builds hub, agent and localfed from the checkout into bin, links bin/k8s to the
// Kubernetes binaries and puts the node images in bin/images (nodeImages), the layout
// `localfed up --bin` expects.
func buildBinaries(bin string) error {
	if err := framework.Build(bin, "./cmd/hub", "./cmd/agent", "./hack/localfed"); err != nil {
		return err
	}
	k8s, err := framework.BinDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(k8s, "kubelet")); err != nil {
		return fmt.Errorf("kubelet not found in %s (run `make k8s-bins`): %w", k8s, err)
	}
	k8s, err = filepath.Abs(k8s)
	if err != nil {
		return err
	}
	if err := nodeImages(filepath.Join(bin, "images")); err != nil {
		return err
	}
	return os.Symlink(k8s, filepath.Join(bin, "k8s"))
}

// nodeImages fills dir with the node images: pause, postgres-15 and hub linked from bin/images
// (make images: they change with the machine's packages, not with this checkout), and the agent
// image, which carries dbfleet-instance into every postgres pod, built afresh from the checkout.
// A stale agent image from bin/images once ran a whole suite with the instance manager of an
// earlier commit.
func nodeImages(dir string) error {
	images := filepath.Join(framework.RepoRoot(), "bin", "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"pause.tar", "postgres-15.tar", "hub.tar"} {
		if _, err := os.Stat(filepath.Join(images, name)); err != nil {
			return fmt.Errorf("the node images are not in %s (run `make images`): %w", images, err)
		}
		if err := os.Symlink(filepath.Join(images, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	cmd := exec.Command("go", "run", "./hack/images", "--out", dir, "--only", "agent")
	cmd.Dir = framework.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the agent image: %w\n%s", err, out)
	}
	return nil
}
