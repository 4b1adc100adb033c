package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Processes are started detached (a session of their own, stdin /dev/null, output to their log
// file) so they outlive `localfed up`, and are stopped only by the pid in their pid file, after
// checking that the pid still runs a command of this federation (its command line names the
// state directory), so a recycled pid is never signalled.

// stopTimeout is how long a process gets after SIGTERM; kube-apiserver can take more than 10 s.
const stopTimeout = 15 * time.Second

// running is a process this invocation started.
type running struct {
	name   string
	pid    int
	log    string
	exited chan struct{} // closed when it exits
	err    error         // its exit status, once exited is closed
}

// start runs c detached and writes its pid file.
func (d stateDir) start(c Component) (*running, error) {
	logf, err := os.OpenFile(d.logFile(c.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n==== localfed %s: %s\n", time.Now().Format(time.RFC3339), strings.Join(c.Args, " "))
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.Name, err)
	}
	r := &running{name: c.Name, pid: cmd.Process.Pid, log: d.logFile(c.Name), exited: make(chan struct{})}
	go func() { r.err = cmd.Wait(); close(r.exited) }()
	if err := os.WriteFile(d.pidFile(c.Name), []byte(strconv.Itoa(r.pid)+"\n"), 0o600); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	return r, nil
}

// exitError says how r ended, or "" while it runs.
func (r *running) exitError() string {
	select {
	case <-r.exited:
		if r.err == nil {
			return "exited with status 0"
		}
		return r.err.Error()
	default:
		return ""
	}
}

// readPid is the pid in a component's pid file.
func (d stateDir) readPid(component string) (int, error) {
	data, err := os.ReadFile(d.pidFile(component))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: not a pid: %q", d.pidFile(component), data)
	}
	return pid, nil
}

// alive reports whether pid runs (not a zombie) a command of this federation.
func (d stateDir) alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(string(d)))
}

// pidStatus is a component's pid and whether it is alive; pid 0 when it has no pid file.
func (d stateDir) pidStatus(component string) (int, bool) {
	pid, err := d.readPid(component)
	if err != nil {
		return 0, false
	}
	return pid, d.alive(pid)
}

// stop ends a component by its pid file: SIGTERM, SIGKILL after stopTimeout. It reports what it
// did; a component already gone is not an error. The pid file is removed.
func (d stateDir) stop(component string) (string, error) {
	pid, err := d.readPid(component)
	if errors.Is(err, fs.ErrNotExist) {
		return "no pid file", nil
	}
	if err != nil {
		return "", err
	}
	defer os.Remove(d.pidFile(component))
	if !d.alive(pid) {
		return fmt.Sprintf("pid %d already gone", pid), nil
	}
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return "", fmt.Errorf("%s (pid %d): SIGTERM: %w", component, pid, err)
	}
	if waitGone(d, pid, stopTimeout) {
		return fmt.Sprintf("pid %d stopped in %s", pid, time.Since(start).Round(100*time.Millisecond)), nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return "", fmt.Errorf("%s (pid %d): SIGKILL: %w", component, pid, err)
	}
	if waitGone(d, pid, 5*time.Second) {
		return fmt.Sprintf("pid %d killed after %s without exiting on SIGTERM", pid, stopTimeout), nil
	}
	return "", fmt.Errorf("%s (pid %d) still runs after SIGKILL", component, pid)
}

func waitGone(d stateDir, pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for d.alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// stopAll stops components in parallel and prints one line each.
func (d stateDir) stopAll(components []string) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, c := range components {
		wg.Go(func() {
			what, err := d.stop(c)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				say("%s: %v", c, err)
				return
			}
			say("%s: %s", c, what)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// freePorts reserves n distinct free ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close() // held until all are chosen, so none is chosen twice
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail is the last n lines of a log file, indented, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 300 {
			l = l[:300] + "…"
		}
		lines[i] = "    | " + l
	}
	return strings.Join(lines, "\n")
}
