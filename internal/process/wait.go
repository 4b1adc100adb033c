package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Probe reports nil once what it probes is ready, else what it found instead.
type Probe func(context.Context) error

// DefaultInterval is how often Wait probes unless told otherwise.
const DefaultInterval = 100 * time.Millisecond

type waitOptions struct {
	interval, attempt time.Duration
	watch             []*Process
}

// WaitOption tunes Wait.
type WaitOption func(*waitOptions)

// Interval sets how often the probe runs (DefaultInterval otherwise).
func Interval(d time.Duration) WaitOption { return func(o *waitOptions) { o.interval = d } }

// AttemptTimeout bounds each probe on its own, so that one hung request does not use up the
// whole wait.
func AttemptTimeout(d time.Duration) WaitOption { return func(o *waitOptions) { o.attempt = d } }

// Watching ends the wait as soon as one of procs exits, with an *ExitError naming it and showing
// the end of its log; nil entries are ignored.
func Watching(procs ...*Process) WaitOption {
	return func(o *waitOptions) {
		for _, p := range procs {
			if p != nil {
				o.watch = append(o.watch, p)
			}
		}
	}
}

// ErrNotReady is what a probe that has nothing more to say returns while it waits: Wait's
// timeout error then reports the last other error the probe returned, if any.
var ErrNotReady = errors.New("not ready yet")

// permanent is a probe error that ends the wait at once.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks a probe's error as one that waiting longer cannot fix: Wait returns it at once.
func Permanent(err error) error { return permanent{err} }

// Wait runs probe until it returns nil, then returns nil. It fails when timeout passes (with
// the last thing probe said; the error wraps context.DeadlineExceeded), when ctx ends, when probe
// returns a Permanent error, or when a watched process exits. It never sleeps for a fixed time
// beyond the probing interval.
func Wait(ctx context.Context, what string, timeout time.Duration, probe Probe, opts ...WaitOption) error {
	o := waitOptions{interval: DefaultInterval}
	for _, opt := range opts {
		opt(&o)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A watched process that exits cuts a probe short: one hanging on a port that nobody serves
	// any more must not hold the wait until its timeout.
	exited, exit := context.WithCancel(wctx)
	defer exit()
	for _, p := range o.watch {
		go func() {
			select {
			case <-p.done:
				exit()
			case <-exited.Done():
			}
		}()
	}
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	var last error
	for {
		for _, p := range o.watch {
			if err := p.exitError(what); err != nil {
				return err
			}
		}
		pctx, pcancel := context.WithCancel(exited)
		if o.attempt > 0 {
			pctx, pcancel = context.WithTimeout(exited, o.attempt)
		}
		err := probe(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		if perm := (permanent{}); errors.As(err, &perm) {
			return fmt.Errorf("waiting for %s: %w", what, perm.err)
		}
		// A probe cut short by the end of the wait says nothing, nor does ErrNotReady: keep what
		// the one before said.
		if last == nil || (wctx.Err() == nil && !errors.Is(err, ErrNotReady)) {
			last = err
		}
		select {
		case <-wctx.Done():
			// A process that exited while the last probe ran is the better explanation.
			for _, p := range o.watch {
				if err := p.exitError(what); err != nil {
					return err
				}
			}
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted while waiting for %s: %w", what, ctx.Err())
			}
			return &TimeoutError{What: what, Timeout: timeout, Last: last, Watched: o.watch}
		case <-tick.C:
		}
	}
}

// WaitReady is Wait watching p.
func (p *Process) WaitReady(ctx context.Context, what string, timeout time.Duration, probe Probe, opts ...WaitOption) error {
	return Wait(ctx, what, timeout, probe, append(opts, Watching(p))...)
}

// TimeoutError is a Wait that ran out of time.
type TimeoutError struct {
	What    string
	Timeout time.Duration
	// Last is what the probe last said.
	Last    error
	Watched []*Process
}

func (e *TimeoutError) Error() string {
	msg := fmt.Sprintf("timed out after %s waiting for %s", e.Timeout, e.What)
	if e.Last != nil && !errors.Is(e.Last, ErrNotReady) {
		msg += fmt.Sprintf(": %v", e.Last)
	}
	var logs []string
	for _, p := range e.Watched {
		if p.logFile != "" {
			logs = append(logs, DisplayPath(p.logFile))
		}
	}
	if len(logs) > 0 {
		msg += fmt.Sprintf("; see %s, the first ends:\n%s", strings.Join(logs, ", "), tailLines(e.Watched[0].Output(), tailLength))
	}
	return msg
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) hold.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// HTTPOK is a probe that succeeds once GET url answers 200 OK and, when contains is given, its
// body holds each of those strings.
func HTTPOK(url string, contains ...string) Probe {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s %s", url, resp.Status, bytes.TrimSpace(body[:min(len(body), 512)]))
		}
		for _, s := range contains {
			if !bytes.Contains(body, []byte(s)) {
				return fmt.Errorf("%s: %s without %q: %s", url, resp.Status, s, bytes.TrimSpace(body[:min(len(body), 512)]))
			}
		}
		return nil
	}
}
