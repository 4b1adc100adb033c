package reaper

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfleet/dbfleet/internal/procfs"
)

// An orphan adopted by this process (a child subreaper here, as PID 1 is in a container) is
// reaped on the second look that finds it a zombie, never on the first; a child this process
// waits for itself is left to its own Wait.
func TestReapsOrphansNotOwnChildren(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }()

	// sh starts cat in the background and exits: cat is orphaned and adopted by this process.
	// cat waits on a pipe this test holds, so it outlives sh: a background child that exits
	// first is reaped by sh itself (dash waits for any child on SIGCHLD), and would never
	// become ours.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Close() }()
	sh := exec.Command("sh", "-c", "cat <&3 >/dev/null 2>&1 & echo $!")
	sh.ExtraFiles = []*os.File{r}
	out, err := sh.Output()
	_ = r.Close()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	// sh has been waited for, so the kernel has already handed cat to this process.
	if st, err := procfs.ReadStat(orphan); err != nil || st.PPid != os.Getpid() || st.Zombie() {
		t.Fatalf("orphan %d: %+v, %v; want running, adopted by this process (%d)", orphan, st, err, os.Getpid())
	}
	if seen, n := reap(nil); n != 0 || seen[orphan] {
		t.Fatalf("while the orphan runs: reaped %d, saw %v; want nothing", n, seen)
	}
	_ = w.Close() // cat reads EOF and exits
	deadline := time.Now().Add(10 * time.Second)
	for !zombieChildren(os.Getpid())[orphan] {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became a zombie child of this process", orphan)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A child of our own, still running, which its Wait reaps.
	own := exec.Command("sleep", "0.2")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}

	seen, n := reap(nil)
	if n != 0 || !seen[orphan] {
		t.Fatalf("first look: reaped %d, saw %v; want none reaped, the orphan seen", n, seen)
	}
	if _, n = reap(seen); n != 1 {
		t.Fatalf("second look reaped %d, want the orphan", n)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(orphan)); !os.IsNotExist(err) {
		t.Fatalf("the orphan %d is still there (%v)", orphan, err)
	}
	if err := own.Wait(); err != nil {
		t.Fatalf("our own child's Wait: %v (the reaper took it)", err)
	}
}
