package postgres

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakePostgres is a stand-in postmaster that ignores the fast-shutdown signal (as a postgres
// stuck in its shutdown checkpoint would) and exits on the immediate one, noting each signal.
const fakePostgres = `#!/bin/sh
trap 'echo INT >> "$SIGNALS"' INT
trap 'echo QUIT >> "$SIGNALS"; exit 0' QUIT
echo started >> "$SIGNALS"
while :; do sleep 0.05; done
`

func startFake(t *testing.T) (*Process, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "postgres"), []byte(fakePostgres), 0o755); err != nil {
		t.Fatal(err)
	}
	signals := filepath.Join(dir, "signals")
	t.Setenv("SIGNALS", signals)
	p := &Process{Bins: Binaries{Dir: dir}, DataDir: dir}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	// Signals sent before the shell installed its traps would kill it outright.
	for {
		if b, _ := os.ReadFile(signals); strings.Contains(string(b), "started") {
			return p, signals
		}
		select {
		case <-p.Exited():
			t.Fatal("the stand-in postmaster exited at start")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestStopTurnsImmediateWhenFastDoesNotFinish(t *testing.T) {
	p, signals := startFake(t)
	p.Stop(time.Now().Add(200 * time.Millisecond))
	if p.Running() {
		t.Fatal("postgres still runs after Stop")
	}
	b, _ := os.ReadFile(signals)
	if got := strings.Fields(string(b)); strings.Join(got, " ") != "started INT QUIT" {
		t.Fatalf("signals = %v, want a fast shutdown (INT) then an immediate one (QUIT)", got)
	}
	if p.Crashed() {
		t.Error("a postmaster stopped by Stop counts as crashed")
	}
}

func TestCrashedAfterExitingOnItsOwn(t *testing.T) {
	p, _ := startFake(t)
	if p.Crashed() {
		t.Fatal("a running postmaster counts as crashed")
	}
	p.Signal(syscall.SIGKILL)
	<-p.Exited()
	if !p.Crashed() {
		t.Fatal("a killed postmaster does not count as crashed")
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Now())
	if p.Crashed() {
		t.Error("a restarted postmaster counts as crashed")
	}
}
