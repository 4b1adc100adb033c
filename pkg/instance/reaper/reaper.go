package reaper

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/go-logr/logr"

	"github.com/dbfleet/dbfleet/internal/procfs"
)

// Run reaps, every interval until ctx ends, the zombie children of this process that were
// already zombies at the previous look. A child this process started and waits for itself
// (postgres, its tools: exec.Cmd.Wait, which blocks in wait4 from the start) is reaped the moment
// it exits, so a zombie seen twice, an interval apart, is an orphan nobody waits for.
func Run(ctx context.Context, interval time.Duration, log logr.Logger) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var seen map[int]bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var n int
		seen, n = reap(seen)
		if n > 0 {
			log.V(1).Info("Reaped orphaned processes", "count", n)
		}
	}
}

// reap waits for every zombie child that is in before, and returns the zombie children it found
// now (those it reaped included: gone, they are never found again) and how many it reaped.
func reap(before map[int]bool) (map[int]bool, int) {
	now := zombieChildren(os.Getpid())
	n := 0
	for pid := range now {
		if !before[pid] {
			continue
		}
		var status syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &status, syscall.WNOHANG, nil); err == nil && got == pid {
			n++
		}
	}
	return now, n
}

// zombieChildren are the processes whose parent is ppid and that have exited unreaped.
func zombieChildren(ppid int) map[int]bool {
	out := map[int]bool{}
	for _, st := range procfs.All() {
		if st.Zombie() && st.PPid == ppid {
			out[st.Pid] = true
		}
	}
	return out
}
