package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// crashLoop is the fault of a primary whose postgres dies over and over: every killEvery, the
// postmaster of database db's primary pod (in namespace ns, on cluster member) is killed with
// SIGKILL, from the host, as an out-of-memory kill would; its instance manager starts it again
// each time. heal stops the killing; the test's end does too.
func crashLoop(ns, db string) func(member string) (inject, heal func(t *testing.T)) {
	const killEvery = 2 * time.Second
	return func(member string) (inject, heal func(t *testing.T)) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		return func(t *testing.T) {
				d, err := fed.database(ctx, &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: db}})
				if err != nil || d.Status.Primary == nil || d.Status.Primary.Cluster != member {
					t.Fatalf("no primary of %s/%s on %s to crash (%v)", ns, db, member, err)
				}
				pod := d.Status.Primary.Pod
				env := []string{contract.EnvPodName + "=" + pod, contract.EnvNamespace + "=" + ns, contract.EnvCluster + "=" + member}
				killed := 0
				if !killPostmaster(env) {
					t.Fatalf("no postmaster of %s/%s/%s found to kill", member, ns, pod)
				}
				killed++
				go func() {
					defer close(done)
					tick := time.NewTicker(killEvery)
					defer tick.Stop()
					for {
						select {
						case <-ctx.Done():
							t.Logf("killed the postmaster of %s/%s %d times", member, pod, killed)
							return
						case <-tick.C:
							if killPostmaster(env) {
								killed++
							}
						}
					}
				}()
				t.Cleanup(func() { cancel(); <-done })
			}, func(*testing.T) {
				cancel()
				<-done
			}
	}
}

// killPostmaster kills, with SIGKILL, the postmaster run by the instance manager whose
// environment holds every one of env: the child named postgres of the process that has them
// and whose parent does not. It reports whether it found one.
func killPostmaster(env []string) bool {
	procs, _ := os.ReadDir("/proc")
	managers := map[int]bool{}
	parents := map[int]int{}
	names := map[int]string{}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		open, close := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || close < open {
			continue
		}
		fields := strings.Fields(string(stat[close+1:]))
		if len(fields) < 2 {
			continue
		}
		if fields[0] == "Z" {
			continue // exited, not reaped: killing it again proves nothing
		}
		ppid, _ := strconv.Atoi(fields[1])
		parents[pid], names[pid] = ppid, string(stat[open+1:close])
		raw, err := os.ReadFile(filepath.Join("/proc", p.Name(), "environ"))
		if err != nil {
			continue
		}
		vars := strings.Split(string(raw), "\x00")
		all := true
		for _, e := range env {
			if !contains(vars, e) {
				all = false
				break
			}
		}
		if all {
			managers[pid] = true
		}
	}
	for pid, ppid := range parents {
		// The postmaster: a postgres child of a matching process whose own parent does not
		// match (the instance manager, PID 1 of its container). Its own children match too.
		if names[pid] == "postgres" && managers[ppid] && !managers[parents[ppid]] {
			return syscall.Kill(pid, syscall.SIGKILL) == nil
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
