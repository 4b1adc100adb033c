package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// TestHealthyPrimariesOnABusyMachine holds the machine at a load average of at least 20 (stress-ng,
// as many CPU hogs as the target load) for 10 minutes (DBFLEET_E2E_BUSY_FOR) while five healthy
// databases run on the local federation, each with its primary in a member (round robin), a
// standby in each other and a writer of its own. Nothing is wrong with any of them, so the
// target is no primary fencing itself or fenced by its agent, and no epoch change: a busy
// machine must not move a primary (issue 34: Lease renewals starved by a busy machine once fenced
// healthy primaries over and over). It logs the counts, the writers' longest stretch without an
// acknowledged write, and the load; it fails on any fencing or epoch change. A benchmark: `make
// bench-busy`.
func TestHealthyPrimariesOnABusyMachine(t *testing.T) {
	requireBench(t)
	stress, err := exec.LookPath("stress-ng")
	if err != nil {
		t.Fatal("stress-ng is not installed (apt-get install stress-ng; make bench-busy does)")
	}
	hold := 10 * time.Minute
	if v := os.Getenv("DBFLEET_E2E_BUSY_FOR"); v != "" {
		if hold, err = time.ParseDuration(v); err != nil {
			t.Fatalf("DBFLEET_E2E_BUSY_FOR=%q: %v", v, err)
		}
	}
	const ns, count, targetLoad = "busy", 5, 20
	fed.requireHealthy(t)
	fed.setUp(t, ns, dynamicWeights())
	dbcs := make([]*dbfleetv1alpha1.DatabaseCluster, count)
	for i := range dbcs {
		dbcs[i] = newDatabase(ns, fmt.Sprintf("shop-%d", i), 3, members[i%len(members)])
		fed.create(t, dbcs[i])
		created := time.Now()
		await(t, 5*time.Minute, dbcs[i].Name+" rolled out", func(ctx context.Context) (bool, error) {
			err := fed.converged(ctx, dbcs[i])
			return err == nil, err
		})
		t.Logf("%s rolled out in %.1fs; load %s", dbcs[i].Name, time.Since(created).Seconds(), loadLine())
	}
	ctx := context.Background()
	before := map[string]dbfleetv1alpha1.PrimaryStatus{}
	writers := map[string]*fleetWriter{}
	for _, dbc := range dbcs {
		d, err := fed.database(ctx, dbc)
		if err != nil {
			t.Fatal(err)
		}
		before[dbc.Name] = *d.Status.Primary
		login := fed.createWriterTable(t, dbc)
		w := fed.startWriterAt(t, dbc, login, lightPace)
		w.awaitAcks(t, primaryInstance(*d.Status.Primary), 20, 2*time.Minute)
		writers[dbc.Name] = w
	}

	sw := newStopwatch(t)
	fences := watchFences(t, sw, dbcs)
	cmd := exec.Command(stress, "--cpu", strconv.Itoa(targetLoad), "--timeout", strconv.Itoa(int(hold.Seconds())+60)+"s", "--quiet")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopStress := sync.OnceFunc(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // its own process group: the hogs too
		_ = cmd.Wait()
	})
	t.Cleanup(stopStress)
	sw.lap(fmt.Sprintf("stress-ng --cpu %d started (pid %d); load %s", targetLoad, cmd.Process.Pid, loadLine()))
	load := watchLoad()
	cpu := readCPU()
	end := time.Now().Add(hold)
	for time.Now().Before(end) {
		time.Sleep(time.Minute) // the load is held for the benchmark's length: not a wait for a condition
		sw.lap("load " + loadLine())
	}
	busy, maxLoad := cpu.busySince(), load.end()
	stressEnd := time.Now()
	stopStress()
	sw.lap("stress-ng stopped; load " + loadLine())
	fenced := fences.stop()

	epochChanges := 0
	var gaps []string
	for _, dbc := range dbcs {
		d, err := fed.database(ctx, dbc)
		if err != nil {
			t.Fatal(err)
		}
		was, p := before[dbc.Name], d.Status.Primary
		if p == nil || p.Epoch != was.Epoch || p.Cluster != was.Cluster {
			epochChanges++
			t.Errorf("%s: primary %s at epoch %d before, %+v after: a healthy primary moved on a busy machine", dbc.Name, primaryInstance(was), was.Epoch, p)
		}
		gap, from, _ := writers[dbc.Name].gapUntil(sw.start, stressEnd)
		gaps = append(gaps, fmt.Sprintf("%s %.1fs (from %+.0fs)", dbc.Name, gap.Seconds(), from.Sub(sw.start).Seconds()))
	}
	for _, f := range fenced {
		t.Errorf("fenced on a busy machine: %s", f)
	}
	t.Logf("FIGURE %s: %d databases, load average held at max %.1f for %s (CPU %.0f%% busy): %d primaries fenced, %d epoch changes; longest stretch without an acknowledged write: %s",
		t.Name(), count, maxLoad, hold, busy, len(fenced), epochChanges, strings.Join(gaps, ", "))
	if maxLoad < targetLoad {
		t.Logf("the load average reached only %.1f, below the target %d: the figure is for a lighter load", maxLoad, targetLoad)
	}
}

// fenceWatch polls every member's share of each database every second and records, once each,
// every instance that reports itself fenced and every share the agent reports Fenced.
type fenceWatch struct {
	stopCh chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	seen   []string
}

func watchFences(t *testing.T, sw *stopwatch, dbcs []*dbfleetv1alpha1.DatabaseCluster) *fenceWatch {
	w := &fenceWatch{stopCh: make(chan struct{}), done: make(chan struct{})}
	noted := map[string]bool{}
	note := func(what string) {
		if noted[what] {
			return
		}
		noted[what] = true
		t.Logf("%+6.1fs  %s", time.Since(sw.start).Seconds(), what) // not sw.lap: its map is the test goroutine's
		w.mu.Lock()
		w.seen = append(w.seen, fmt.Sprintf("%s at %+.1fs", what, time.Since(sw.start).Seconds()))
		w.mu.Unlock()
	}
	go func() {
		defer close(w.done)
		for {
			for _, dbc := range dbcs {
				for _, m := range members {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					mdb := &dbfleetv1alpha1.MemberDatabase{}
					err := fed.hub.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(m), Name: dbfleetv1alpha1.MemberDatabaseName(dbc.Namespace, dbc.Name)}, mdb)
					cancel()
					if err != nil {
						continue
					}
					for _, in := range mdb.Status.Instances {
						if in.Role == dbfleetv1alpha1.InstanceFenced {
							note(fmt.Sprintf("%s: %s/%s fenced itself at epoch %d (%s)", dbc.Name, m, in.Pod, in.Epoch, in.Message))
						}
					}
					for _, c := range mdb.Status.Conditions {
						if c.Type == dbfleetv1alpha1.ConditionFenced && c.Status == "True" {
							note(fmt.Sprintf("%s: %s's agent fenced its share at epoch %d (%s)", dbc.Name, m, mdb.Status.Epoch, c.Reason))
						}
					}
				}
			}
			select {
			case <-w.stopCh:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the watch (once) and returns what it saw.
func (w *fenceWatch) stop() []string {
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}
