package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The children of these tests are this test binary run again with childEnv set: it then plays
// a small server (serve ADDR), a process that ignores SIGTERM (ignore-term FILE), one that
// fails at start (fail), or one that prints its group ids (groups). The last argument of each is a marker naming the test's directory.
const childEnv = "DBFLEET_PROCESS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		child(os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

func child(args []string) {
	switch args[0] {
	case "serve":
		l, err := net.Listen("tcp", args[1])
		if err != nil {
			fmt.Println("listen:", err) // "bind: address already in use", as a real server says
			os.Exit(1)
		}
		fmt.Println("serving on", l.Addr())
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM)
		go func() { <-stop; os.Exit(0) }()
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") }))
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		if err := os.WriteFile(args[1], []byte("up"), 0o600); err != nil {
			os.Exit(1)
		}
		select {}
	case "fail":
		fmt.Println("something broke")
		os.Exit(3)
	case "groups":
		groups, err := os.Getgroups()
		fmt.Printf("gid %d groups %v %v\n", os.Getgid(), groups, err)
		os.Exit(0)
	}
	os.Exit(2)
}

type fixture struct {
	t      *testing.T
	dir    string // the marker too: every child's command line names it
	self   string
	prefix string
}

func newFixture(t *testing.T) *fixture {
	t.Setenv(childEnv, "1") // inherited by the children only: this process checked it at start
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, dir: t.TempDir(), self: self}
}

// spec is a child running mode with args, logging and with a pid file in the fixture's directory.
func (f *fixture) spec(name, mode string, args ...string) Spec {
	return Spec{
		Name:    name,
		Args:    append(append([]string{f.self, mode}, args...), f.dir),
		LogFile: filepath.Join(f.dir, name+".log"),
		PidFile: filepath.Join(f.dir, name+".pid"),
	}
}

func (f *fixture) start(spec Spec) *Process {
	f.t.Helper()
	p, err := Start(spec)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _, _ = p.Stop(time.Second) })
	return p
}

func (f *fixture) serve(name string, port *Port, opts ...func(*Spec)) *Process {
	f.t.Helper()
	spec := f.spec(name, "serve", port.Addr())
	spec.Ports = []*Port{port}
	for _, o := range opts {
		o(&spec)
	}
	p := f.start(spec)
	if err := p.WaitReady(context.Background(), name, time.Minute, HTTPOK("http://"+port.Addr()+"/readyz", "ok")); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// TestStartWaitStop: a reserved port stays bound until its server starts; the server is waited
// for by a probe, recorded in its pid file, found by its marker, and stopped by SIGTERM.
func TestStartWaitStop(t *testing.T) {
	f := newFixture(t)
	port, err := ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := net.Listen("tcp", port.Addr()); err == nil {
		_ = l.Close()
		t.Fatalf("port %s could be bound while reserved", port)
	}
	p := f.serve("server", port)
	if port.Reserved() {
		t.Error("port still reserved after its server started")
	}
	pid, err := ReadPidFile(filepath.Join(f.dir, "server.pid"))
	if err != nil || pid != p.Pid() {
		t.Fatalf("pid file: %d, %v; want %d", pid, err, p.Pid())
	}
	if !Running(pid, f.dir) {
		t.Errorf("Running(%d, its marker) = false, want true", pid)
	}
	if Running(pid, f.dir+"-someone-else") {
		t.Errorf("Running(%d, another marker) = true, want false", pid)
	}

	s, err := p.Stop(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if s.Gone || s.Killed {
		t.Errorf("Stop = %+v, want stopped by SIGTERM", s)
	}
	if exited, exitErr := p.Exited(); !exited || exitErr != nil {
		t.Errorf("after Stop: exited=%v err=%v, want exit status 0", exited, exitErr)
	}
	if Running(pid, "") {
		t.Errorf("pid %d still running after Stop", pid)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "server.pid")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after Stop: %v, want it removed", err)
	}
	if again, err := p.Stop(time.Minute); err != nil || again != s {
		t.Errorf("second Stop = %+v, %v; want the first's %+v", again, err, s)
	}
	if !strings.Contains(p.Output(), "serving on "+port.Addr()) {
		t.Errorf("log of this start lacks the server's output:\n%s", p.Output())
	}
}

// TestStopKillsWhatIgnoresSIGTERM: SIGKILL follows SIGTERM after the timeout.
func TestStopKillsWhatIgnoresSIGTERM(t *testing.T) {
	f := newFixture(t)
	ready := filepath.Join(f.dir, "ready")
	p := f.start(f.spec("stubborn", "ignore-term", ready))
	err := p.WaitReady(context.Background(), "stubborn", time.Minute, func(context.Context) error {
		_, err := os.Stat(ready)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Stop(200 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Killed {
		t.Errorf("Stop = %+v, want Killed", s)
	}
	if _, exitErr := p.Exited(); exitErr == nil || !strings.Contains(exitErr.Error(), "killed") {
		t.Errorf("exit: %v, want signal: killed", exitErr)
	}
}

// TestStopPidFile: a detached process (a session of its own) is stopped through its pid file, and
// only while its pid runs a command naming the marker.
func TestStopPidFile(t *testing.T) {
	f := newFixture(t)
	port, err := ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	p := f.serve("detached", port, func(s *Spec) { s.Detach = true })
	if sid := session(t, p.Pid()); sid != p.Pid() {
		t.Errorf("detached process is in session %d, want its own (%d)", sid, p.Pid())
	}
	pidFile := filepath.Join(f.dir, "detached.pid")

	s, err := StopPid(p.Pid(), "not-"+f.dir, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Gone {
		t.Errorf("StopPid with another marker = %+v, want Gone (not ours)", s)
	}
	if exited, _ := p.Exited(); exited {
		t.Fatal("a process whose command line lacks the marker was stopped")
	}

	if s, err = StopPidFile(pidFile, f.dir, time.Minute); err != nil {
		t.Fatal(err)
	}
	if s.Gone || s.Killed {
		t.Errorf("StopPidFile = %+v, want stopped by SIGTERM", s)
	}
	<-p.Done()
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after StopPidFile: %v, want it removed", err)
	}
	if _, err := StopPidFile(pidFile, f.dir, time.Minute); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("StopPidFile without a pid file: %v, want ErrNotExist", err)
	}
}

// session is the session id of pid, from /proc/PID/stat.
func session(t *testing.T, pid int) int {
	t.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
	sid, err := strconv.Atoi(strings.Fields(rest)[3]) // state, ppid, pgrp, session
	if err != nil {
		t.Fatal(err)
	}
	return sid
}

// TestWaitEndsWhenProcessExits: a watched process that exits ends the wait with its exit and
// log, without waiting out the timeout.
func TestWaitEndsWhenProcessExits(t *testing.T) {
	f := newFixture(t)
	p := f.start(f.spec("broken", "fail"))
	err := p.WaitReady(context.Background(), "broken", time.Hour, func(context.Context) error { return errors.New("not yet") })
	var exit *ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("WaitReady = %v, want an *ExitError", err)
	}
	if !strings.Contains(exit.How, "exit status 3") || !strings.Contains(exit.Tail, "something broke") {
		t.Errorf("ExitError = %q, want exit status 3 and the log's last line", err)
	}
	if IsPortConflict(err) {
		t.Error("IsPortConflict = true for a process that did not fail on a port")
	}
}

// TestWaitCutsHungProbeShort: a probe hanging (on a port nobody answers any more) is cancelled
// as soon as the watched process exits, not left to run out the wait's time.
func TestWaitCutsHungProbeShort(t *testing.T) {
	f := newFixture(t)
	p := f.start(f.spec("broken", "fail"))
	var probeEnded error
	err := p.WaitReady(context.Background(), "broken", time.Minute, func(ctx context.Context) error {
		<-ctx.Done()
		probeEnded = ctx.Err()
		return ctx.Err()
	})
	var exit *ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("WaitReady = %v, want an *ExitError", err)
	}
	if !errors.Is(probeEnded, context.Canceled) {
		t.Errorf("the hung probe ended with %v, want it cancelled when the process exited", probeEnded)
	}
}

// TestWaitTimeoutAndPermanent: a wait that runs out of time says what the probe last said and
// wraps context.DeadlineExceeded; a Permanent probe error ends it at once.
func TestWaitTimeoutAndPermanent(t *testing.T) {
	ctx := context.Background()
	err := Wait(ctx, "the thing", 300*time.Millisecond, func(context.Context) error { return errors.New("not yet") })
	var timeout *TimeoutError
	if !errors.As(err, &timeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not yet") {
		t.Errorf("Wait = %v, want a TimeoutError with the probe's last error", err)
	}

	// ErrNotReady says nothing: the timeout reports the last error before it.
	calls := 0
	err = Wait(ctx, "the thing", 300*time.Millisecond, func(context.Context) error {
		if calls++; calls == 1 {
			return errors.New("connection refused")
		}
		return ErrNotReady
	})
	if !errors.As(err, &timeout) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Wait = %v, want a TimeoutError naming the last error other than ErrNotReady", err)
	}

	broken := errors.New("cannot work")
	calls = 0
	err = Wait(ctx, "the thing", time.Hour, func(context.Context) error { calls++; return Permanent(broken) })
	if !errors.Is(err, broken) || errors.As(err, &timeout) || calls != 1 {
		t.Errorf("Wait = %v after %d probes, want the permanent error after one", err, calls)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := Wait(cancelled, "the thing", time.Hour, func(context.Context) error { return errors.New("no") }); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a cancelled context = %v, want context.Canceled", err)
	}
}

// TestRetryOnPortConflict: a server whose port another program bound after the release fails
// with "address already in use" and is started again on a fresh port; other failures are not
// retried.
func TestRetryOnPortConflict(t *testing.T) {
	f := newFixture(t)
	attempts := 0
	var first error
	var server *Process
	err := RetryOnPortConflict(3, func() error {
		attempts++
		port, err := ReservePort()
		if err != nil {
			return err
		}
		spec := f.spec(fmt.Sprintf("server-%d", attempts), "serve", port.Addr())
		spec.Ports = []*Port{port}
		if attempts == 1 {
			// Another program takes the port between its release and the server's bind.
			port.Release()
			thief, err := net.Listen("tcp", port.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = thief.Close() })
		}
		p := f.start(spec)
		err = p.WaitReady(context.Background(), spec.Name, time.Minute, HTTPOK("http://"+port.Addr()+"/readyz"))
		if attempts == 1 {
			first = err
		}
		server = p
		return err
	})
	if err != nil {
		t.Fatalf("RetryOnPortConflict = %v after %d attempts", err, attempts)
	}
	if attempts != 2 || !IsPortConflict(first) {
		t.Errorf("%d attempts, the first failing with %v; want 2, the first a port conflict", attempts, first)
	}
	if exited, _ := server.Exited(); exited {
		t.Error("the server of the second attempt is not running")
	}

	attempts = 0
	err = RetryOnPortConflict(3, func() error {
		attempts++
		p := f.start(f.spec("broken", "fail"))
		return p.WaitReady(context.Background(), "broken", time.Hour, func(context.Context) error { return errors.New("not yet") })
	})
	if err == nil || attempts != 1 {
		t.Errorf("a failure that is no port conflict: %d attempts, err %v; want 1 attempt and its error", attempts, err)
	}
}

// TestReservePortsUnique: ports held at once are distinct and bound; a released port is not
// handed out again by this program even when the kernel offers it again.
func TestReservePortsUnique(t *testing.T) {
	held, err := ReservePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	defer ReleaseAll(held)
	seen := map[int]bool{}
	for _, p := range held {
		if seen[p.Number()] {
			t.Errorf("port %d handed out twice", p.Number())
		}
		seen[p.Number()] = true
		if l, err := net.Listen("tcp", p.Addr()); err == nil {
			_ = l.Close()
			t.Errorf("reserved port %d could be bound", p.Number())
		}
	}

	// The kernel offers the same free port again and again (as it may once one is released):
	// the reservation skips the one it handed out and takes the next.
	first, err := ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	first.Release()
	next, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nextPort := next.Addr().(*net.TCPAddr).Port
	_ = next.Close()
	offers := []int{first.Number(), first.Number(), nextPort}
	defer func(real func() (net.Listener, error)) { listen = real }(listen)
	listen = func() (net.Listener, error) {
		if len(offers) == 0 {
			return nil, errors.New("no more offers")
		}
		port := offers[0]
		offers = offers[1:]
		return offered{port}, nil
	}
	second, err := ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	defer second.Release()
	if second.Number() == first.Number() {
		t.Errorf("port %d handed out again after its release", first.Number())
	}
}

// offered is a listener the fake kernel hands out: only its port matters.
type offered struct{ port int }

func (offered) Accept() (net.Conn, error) { return nil, errors.New("not a real listener") }
func (offered) Close() error              { return nil }
func (o offered) Addr() net.Addr          { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: o.port} }

// TestGroup: a process started with a Group runs with that group id alone, as the same user,
// which is what a firewall rule matching its sockets' group relies on.
func TestGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root may set a process's group")
	}
	f := newFixture(t)
	spec := f.spec("groups", "groups")
	spec.Group = 46199
	p := f.start(spec)
	<-p.Done()
	if out := p.Output(); !strings.Contains(out, "gid 46199 groups [] <nil>") {
		t.Errorf("output %q, want gid 46199 and no supplementary groups", out)
	}
}
