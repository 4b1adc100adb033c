package postgres

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// Process is the postmaster, run as a child of the manager. One at a time: Start after it has
// exited starts it again in the same data directory (a crash restart, never a re-clone).
type Process struct {
	Bins    Binaries
	DataDir string
	// Output receives postgres' stdout and stderr (its log).
	Output io.Writer
	// Env is added to the environment postgres inherits (archive_command's options).
	Env []string

	mu      sync.Mutex
	proc    *os.Process
	done    chan struct{}
	exitErr error
	stopped bool // Stop was called for the current postmaster
}

// Crashed says whether the last postmaster exited without Stop being called.
func (p *Process) Crashed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done != nil && !p.runningLocked() && !p.stopped
}

// ErrRunning is returned by Start while the postmaster runs.
var ErrRunning = errors.New("postgres is already running")

// Start starts the postmaster; it does not wait for it to accept connections.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return ErrRunning
	}
	cmd := p.Bins.command("postgres", "-D", p.DataDir)
	cmd.Stdout, cmd.Stderr = p.Output, p.Output
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	// If the manager dies, postgres must not keep taking writes that nobody fences.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres -D %s: %w", p.DataDir, err)
	}
	done := make(chan struct{})
	p.proc, p.done, p.exitErr, p.stopped = cmd.Process, done, nil, false
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Running says whether the postmaster runs.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

func (p *Process) runningLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Exited is closed when the current postmaster exits (nil when none was started).
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// Stop shuts postgres down: fast (refuse connections, end sessions, clean shutdown checkpoint),
// turning immediate when it is still running at immediateAt (no checkpoint; crash recovery at
// the next start), then killed when even that hangs. It returns once the postmaster is gone.
func (p *Process) Stop(immediateAt time.Time) {
	p.mu.Lock()
	proc, done := p.proc, p.done
	running := p.runningLocked()
	if running {
		p.stopped = true
	}
	p.mu.Unlock()
	if !running {
		return
	}
	_ = proc.Signal(syscall.SIGINT)
	immediate := time.NewTimer(time.Until(immediateAt))
	defer immediate.Stop()
	select {
	case <-done:
		return
	case <-immediate.C:
	}
	_ = proc.Signal(syscall.SIGQUIT)
	kill := time.NewTimer(10 * time.Second)
	defer kill.Stop()
	select {
	case <-done:
	case <-kill.C:
		_ = proc.Kill()
		<-done
	}
}

// Signal forwards sig to the postmaster if it runs.
func (p *Process) Signal(sig os.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		_ = p.proc.Signal(sig)
	}
}
