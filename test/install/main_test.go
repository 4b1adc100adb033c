package install

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/test/framework"
)

// members are the federation's member clusters, with the region and zone they join with.
var members = []layout.Member{
	{Name: "east", Region: "us-east", Zone: "us-east-1a"},
	{Name: "west", Region: "us-west", Zone: "us-west-2a"},
}

// work is the suite's temporary directory: bin/ (hub, localfed, k8s/ and images/ links), fed/
// (the federation's state directory) and what the tests write (values files, a rebuilt image).
var (
	work string
	bin  string
	fed  layout.Dir
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping the install suite in -short mode: it runs a local federation")
		os.Exit(0)
	}
	framework.QuietLogs()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if work, err = os.MkdirTemp("", "dbfleet-install-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bin, fed = filepath.Join(work, "bin"), layout.Dir(filepath.Join(work, "fed"))
	var (
		once    sync.Once
		downErr error
		brought bool
	)
	teardown := func() error {
		once.Do(func() {
			if brought {
				if downErr = down(); downErr != nil {
					fmt.Fprintf(os.Stderr, "install: %v; %s kept: stop what is left with `%s down --dir %s`\n", downErr, work, filepath.Join(bin, "localfed"), fed)
					return
				}
			}
			_ = os.RemoveAll(work)
		})
		return downErr
	}
	defer func() { _ = teardown() }()
	// The federation's processes run detached: an interrupt, or the -timeout about to fire,
	// stops them by their pid files before the test binary goes.
	stopOn := make(chan os.Signal, 1)
	signal.Notify(stopOn, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-stopOn
		fmt.Fprintf(os.Stderr, "install: %v: stopping the local federation\n", sig)
		_ = teardown()
		os.Exit(1)
	}()

	start := time.Now()
	if err := buildBinaries(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("install: built hub and localfed in %s\n", time.Since(start).Round(100*time.Millisecond))
	if _, err := framework.Helm(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	brought = true
	var names []string
	for _, mb := range members {
		names = append(names, mb.Name+"="+mb.Region+"/"+mb.Zone)
	}
	if err := localfed(os.Stdout, "up", "--members", strings.Join(names, ","), "--hub-node", "--no-dbfleet", "--volumes", "10"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("install: local federation up (hub cluster with a node, no dbfleet) in %s, state in %s\n", time.Since(start).Round(100*time.Millisecond), fed)

	if timeout := flag.Lookup("test.timeout").Value.(flag.Getter).Get().(time.Duration); timeout > 2*time.Minute {
		watchdog := time.AfterFunc(timeout-time.Minute, func() {
			fmt.Fprintf(os.Stderr, "install: the -timeout of %s is about to expire: stopping the local federation\n", timeout)
			_ = teardown()
		})
		defer watchdog.Stop()
	}
	code := m.Run()
	if code != 0 {
		keepLogs()
	}
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "install: FAIL: the local federation did not come down cleanly")
		code = 1
	}
	return code
}

// buildBinaries builds hub (for hub join) and localfed into bin and links bin/k8s and
// bin/images, the layout `localfed up --bin` expects.
func buildBinaries() error {
	if err := framework.Build(bin, "./cmd/hub", "./hack/localfed"); err != nil {
		return err
	}
	k8s, err := framework.BinDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(k8s, "kubelet")); err != nil {
		return fmt.Errorf("kubelet not found in %s (run `make k8s-bins`): %w", k8s, err)
	}
	if k8s, err = filepath.Abs(k8s); err != nil {
		return err
	}
	images := filepath.Join(framework.RepoRoot(), "bin", "images")
	for _, a := range []string{"hub.tar", "agent.tar", "postgres-15.tar", "pause.tar"} {
		if _, err := os.Stat(filepath.Join(images, a)); err != nil {
			return fmt.Errorf("the node images are not in %s (run `make images`): %w", images, err)
		}
	}
	if err := os.Symlink(images, filepath.Join(bin, "images")); err != nil {
		return err
	}
	return os.Symlink(k8s, filepath.Join(bin, "k8s"))
}

// localfed runs `bin/localfed cmd --dir <fed> args...` from the repository root.
func localfed(out io.Writer, cmd string, args ...string) error {
	c := exec.Command(filepath.Join(bin, "localfed"), append([]string{cmd, "--dir", string(fed)}, args...)...)
	c.Dir = framework.RepoRoot()
	c.Stdout, c.Stderr = out, out
	if err := c.Run(); err != nil {
		return fmt.Errorf("localfed %s %s: %w", cmd, strings.Join(args, " "), err)
	}
	return nil
}

// down stops the federation with `localfed down` (which fails when a process, shim, mount,
// namespace, link, address, chain or rule of it is left) and checks for itself that no mount
// under the suite's directory, no link of the federation's bridges and no iptables rule naming
// its state directory remain.
func down() error {
	st, loadErr := fed.Load()
	var out bytes.Buffer
	if err := localfed(&out, "down"); err != nil {
		return fmt.Errorf("%w\n%s", err, out.String())
	}
	fmt.Print(out.String())
	var left []string
	if mounts, err := os.ReadFile("/proc/mounts"); err == nil {
		for _, line := range strings.Split(string(mounts), "\n") {
			if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], work) {
				left = append(left, "mount "+f[1])
			}
		}
	}
	if loadErr == nil && st.Network != nil {
		links, _ := net.Interfaces()
		for _, l := range links {
			if strings.HasPrefix(l.Name, st.Network.BridgePrefix) {
				left = append(left, "link "+l.Name)
			}
		}
	}
	for _, table := range []string{"nat", "filter"} {
		if rules, err := exec.Command("iptables", "-w", "-t", table, "-S").Output(); err == nil && strings.Contains(string(rules), string(fed)) {
			left = append(left, "an iptables rule in "+table+" naming "+string(fed))
		}
	}
	if len(left) > 0 {
		return errors.New("left after localfed down: " + strings.Join(left, ", "))
	}
	return nil
}

// keepLogs copies the federation's logs and the pods' logs to a directory it prints.
func keepLogs() {
	logs, err := os.MkdirTemp("", "dbfleet-install-logs-")
	if err != nil {
		return
	}
	err = os.CopyFS(logs, os.DirFS(fed.LogsDir()))
	nodes, _ := filepath.Glob(fed.NodeDir("*"))
	for _, n := range nodes {
		if podLogs := filepath.Join(n, "pod-logs"); err == nil {
			if _, serr := os.Stat(podLogs); serr == nil {
				err = os.CopyFS(filepath.Join(logs, "pods-"+filepath.Base(n)), os.DirFS(podLogs))
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "install: copying the federation's logs to %s: %v\n", logs, err)
		return
	}
	fmt.Fprintf(os.Stderr, "install: the federation's logs are in %s\n", logs)
}
