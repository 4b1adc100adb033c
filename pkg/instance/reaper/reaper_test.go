package reaper

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// An orphan adopted by this process (a child subreaper here, as PID 1 is in a container) is
// reaped on the second look that finds it a zombie, never on the first; a child this process
// waits for itself is left to its own Wait.
func TestReapsOrphansNotOwnChildren(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a child subreaper: %v", err)
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }()

	// sh starts true in the background and exits: true is orphaned, adopted by this process,
	// and exits too.
	out, err := exec.Command("sh", "-c", "true & echo $!").Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
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
