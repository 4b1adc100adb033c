package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/internal/procfs"
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
	all := procfs.All()
	managers := map[int]bool{}
	parents := map[int]int{}
	for _, st := range all {
		parents[st.Pid] = st.PPid
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(st.Pid), "environ"))
		if err != nil {
			continue
		}
		vars := strings.Split(string(raw), "\x00")
		if !slices.ContainsFunc(env, func(e string) bool { return !slices.Contains(vars, e) }) {
			managers[st.Pid] = true
		}
	}
	for _, st := range all {
		// The postmaster: a live postgres child of a matching process whose own parent does not
		// match (the instance manager, PID 1 of its container). Its own children match too, and
		// an exited one (a zombie) proves nothing killed.
		if st.Name == "postgres" && !st.Zombie() && managers[st.PPid] && !managers[parents[st.PPid]] {
			return syscall.Kill(st.Pid, syscall.SIGKILL) == nil
		}
	}
	return false
}
