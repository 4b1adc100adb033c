package process

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec says how to start a process.
type Spec struct {
	// Name names the process in errors and in the header Start writes to its log.
	Name string
	// Args is the command line, Args[0] the binary.
	Args []string
	// Env is added to this program's environment (KEY=VALUE; a later one wins).
	Env []string
	// Dir is the working directory; "" is this program's.
	Dir string
	// LogFile receives stdout and stderr, appended after a header line; "" discards them.
	LogFile string
	// PidFile, when set, is written with the pid once the process started, and removed by Stop.
	PidFile string
	// Detach starts the process in a session of its own with stdin from /dev/null, so that it
	// outlives this program and a terminal's Ctrl-C does not reach it.
	Detach bool
	// Ports are released immediately before the process starts, for it to bind.
	Ports []*Port
	// Group, when not 0, is the group id the process runs with (this program's user, no
	// supplementary groups), so that firewall rules can tell its sockets from others'
	// (iptables -m owner --gid-owner). Only root may set it.
	Group int
}

// Process is a process this program started.
type Process struct {
	name, logFile, pidFile string
	pid                    int
	cmd                    *exec.Cmd
	// logStart is where this start's output begins in the log file.
	logStart int64

	done    chan struct{} // closed once it exited and was reaped
	exitErr error         // how it exited, once done is closed

	stopOnce sync.Once
	stopped  Stopped
	stopErr  error
}

// Start starts the process described by spec. It does not wait for it to be ready: see Wait.
func Start(spec Spec) (*Process, error) {
	if len(spec.Args) == 0 {
		ReleaseAll(spec.Ports)
		return nil, fmt.Errorf("start %s: no command", spec.Name)
	}
	name := spec.Name
	if name == "" {
		name = filepath.Base(spec.Args[0])
	}
	p := &Process{name: name, logFile: spec.LogFile, pidFile: spec.PidFile, done: make(chan struct{})}
	out := io.Discard
	if spec.LogFile != "" {
		f, err := os.OpenFile(spec.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			ReleaseAll(spec.Ports)
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		defer f.Close() // the child has its own descriptor
		fmt.Fprintf(f, "\n==== %s %s: %s\n", name, time.Now().Format(time.RFC3339), strings.Join(spec.Args, " "))
		if p.logStart, err = f.Seek(0, io.SeekEnd); err != nil {
			ReleaseAll(spec.Ports)
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		out = f
	}
	cmd := exec.Command(spec.Args[0], spec.Args[1:]...)
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = out, out
	if len(spec.Env) > 0 {
		cmd.Env = append(os.Environ(), spec.Env...)
	}
	if spec.Detach || spec.Group != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: spec.Detach}
	}
	if spec.Group != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(os.Geteuid()), Gid: uint32(spec.Group)}
	}
	ReleaseAll(spec.Ports)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	go func() { p.exitErr = cmd.Wait(); close(p.done) }()
	if spec.PidFile != "" {
		if err := os.WriteFile(spec.PidFile, []byte(strconv.Itoa(p.pid)+"\n"), 0o600); err != nil {
			_ = cmd.Process.Kill()
			<-p.done
			return nil, fmt.Errorf("start %s: pid file: %w", name, err)
		}
	}
	return p, nil
}

// Name is the process's name from its Spec.
func (p *Process) Name() string { return p.name }

// Pid is its pid.
func (p *Process) Pid() int { return p.pid }

// LogFile is the file its output goes to ("" when discarded).
func (p *Process) LogFile() string { return p.logFile }

// Done is closed once the process exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process exited, and how ("exit status 1", "signal: killed"; nil
// for status 0).
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.exitErr
	default:
		return false, nil
	}
}

// Output is what this start of the process wrote to its log so far.
func (p *Process) Output() string {
	if p.logFile == "" {
		return ""
	}
	f, err := os.Open(p.logFile)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(p.logStart, io.SeekStart); err != nil {
		return ""
	}
	data, _ := io.ReadAll(f)
	return string(data)
}

// exitError describes how p ended before what was ready, with the end of its log; nil while it
// runs.
func (p *Process) exitError(what string) *ExitError {
	exited, err := p.Exited()
	if !exited {
		return nil
	}
	how := "exited with status 0"
	if err != nil {
		how = err.Error()
	}
	output := p.Output()
	return &ExitError{Name: p.name, Pid: p.pid, How: how, Before: what, LogFile: p.logFile,
		Tail: tailLines(output, tailLength), portConflict: strings.Contains(output, addrInUse)}
}

// ExitError is a process that exited before what a Wait waited for was ready.
type ExitError struct {
	Name, How, Before, LogFile string
	Pid                        int
	// Tail is the end of what this start of the process logged, indented.
	Tail string

	portConflict bool
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s (pid %d) %s before %s was ready", e.Name, e.Pid, e.How, e.Before)
	if e.LogFile != "" {
		msg += fmt.Sprintf("; its log %s ends:\n%s", DisplayPath(e.LogFile), e.Tail)
	}
	return msg
}

// Stopped says how a stop went.
type Stopped struct {
	Pid int
	// Gone: the process had exited (or its pid runs something else) before the stop.
	Gone bool
	// Killed: it outlived the timeout after SIGTERM and was sent SIGKILL.
	Killed bool
	// After is how long it took to stop (the timeout when Killed).
	After time.Duration
}

func (s Stopped) String() string {
	switch {
	case s.Gone:
		return fmt.Sprintf("pid %d already gone", s.Pid)
	case s.Killed:
		return fmt.Sprintf("pid %d killed after %s without exiting on SIGTERM", s.Pid, s.After)
	default:
		return fmt.Sprintf("pid %d stopped in %s", s.Pid, s.After.Round(100*time.Millisecond))
	}
}

// killWait is how long a process gets to disappear after SIGKILL.
const killWait = 10 * time.Second

// Stop ends the process: SIGTERM, then SIGKILL when it has not exited after timeout; it waits
// until it exited and removes its pid file. A process that already exited is not an error.
// Calling Stop again returns what the first call did.
func (p *Process) Stop(timeout time.Duration) (Stopped, error) {
	p.stopOnce.Do(func() { p.stopped, p.stopErr = p.stop(timeout) })
	return p.stopped, p.stopErr
}

func (p *Process) stop(timeout time.Duration) (Stopped, error) {
	if p.pidFile != "" {
		defer os.Remove(p.pidFile)
	}
	s := Stopped{Pid: p.pid}
	if exited, _ := p.Exited(); exited {
		s.Gone = true
		return s, nil
	}
	// Until it is reaped (done), the pid is this child's and cannot be recycled.
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return s, fmt.Errorf("%s (pid %d): SIGTERM: %w", p.name, p.pid, err)
	}
	select {
	case <-p.done:
		s.After = time.Since(start)
		return s, nil
	case <-time.After(timeout):
	}
	s.Killed, s.After = true, timeout
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return s, fmt.Errorf("%s (pid %d): SIGKILL: %w", p.name, p.pid, err)
	}
	select {
	case <-p.done:
		return s, nil
	case <-time.After(killWait):
		return s, fmt.Errorf("%s (pid %d) still runs %s after SIGKILL", p.name, p.pid, killWait)
	}
}

// ReadPidFile reads a pid file as Start writes it.
func ReadPidFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return 0, fmt.Errorf("%s: not a pid: %q", path, data)
	}
	return pid, nil
}

// Running reports whether pid is a live process (not a zombie) whose command line contains
// marker; an empty marker matches any command.
func Running(pid int, marker string) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state is the field after the parenthesised command name, which may hold spaces.
	if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' || stat[i+2] == 'X' {
		return false
	}
	if marker == "" {
		return true
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(marker))
}

// goneInterval is how often StopPid looks whether a process it signalled is gone; it cannot wait
// on a process that is not its child.
const goneInterval = 100 * time.Millisecond

// StopPid ends a process known by its pid (from a pid file), started by this or another program:
// SIGTERM, then SIGKILL when it still runs after timeout. It signals pid only while Running(pid,
// marker), so a pid recycled for another command is left alone (reported as Gone).
func StopPid(pid int, marker string, timeout time.Duration) (Stopped, error) {
	s := Stopped{Pid: pid}
	if !Running(pid, marker) {
		s.Gone = true
		return s, nil
	}
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return s, fmt.Errorf("pid %d: SIGTERM: %w", pid, err)
	}
	if gone(pid, marker, timeout) {
		s.After = time.Since(start)
		return s, nil
	}
	s.Killed, s.After = true, timeout
	// Checked once more right before the signal: the pid is still the one we signalled.
	if Running(pid, marker) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return s, fmt.Errorf("pid %d: SIGKILL: %w", pid, err)
		}
	}
	if gone(pid, marker, killWait) {
		return s, nil
	}
	return s, fmt.Errorf("pid %d still runs %s after SIGKILL", pid, killWait)
}

func gone(pid int, marker string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for Running(pid, marker) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(goneInterval)
	}
	return true
}

// StopPidFile stops the process of a pid file with StopPid and removes the file. A missing pid
// file is reported as an error that wraps fs.ErrNotExist.
func StopPidFile(path, marker string, timeout time.Duration) (Stopped, error) {
	pid, err := ReadPidFile(path)
	if err != nil {
		return Stopped{}, err
	}
	s, err := StopPid(pid, marker, timeout)
	if err == nil {
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return s, rerr
		}
	}
	return s, err
}

// tailLength is how many log lines an error shows.
const tailLength = 15

// Tail is the last n lines of a file, indented, for error messages; "" when it cannot be read.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return tailLines(string(data), n)
}

func tailLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
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

// DisplayPath is p relative to the working directory when it is below it, for messages.
func DisplayPath(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
		return r
	}
	return p
}
