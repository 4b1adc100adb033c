package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/test/framework"
)

// await polls cond (every 100 ms) until it holds, and fails the test after timeout saying what
// it waited for and the last error cond returned. Waiting never sleeps for a fixed time.
func await(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := framework.WaitFor(context.Background(), timeout, what, cond); err != nil {
		t.Fatal(err)
	}
}

// stopwatch logs when things were first seen, relative to its start.
type stopwatch struct {
	t     *testing.T
	start time.Time
	seen  map[string]time.Duration
}

func newStopwatch(t *testing.T) *stopwatch {
	return &stopwatch{t: t, start: time.Now(), seen: map[string]time.Duration{}}
}

// lap logs what happened now and returns the time since the start.
func (s *stopwatch) lap(what string) time.Duration {
	s.t.Helper()
	d := time.Since(s.start)
	s.seen[what] = d
	s.t.Logf("%+6.1fs  %s", d.Seconds(), what)
	return d
}

// mark laps what the first time happened is true, and reports whether it was ever seen.
func (s *stopwatch) mark(what string, happened bool) bool {
	s.t.Helper()
	if _, ok := s.seen[what]; ok {
		return true
	}
	if happened {
		s.lap(what)
	}
	return happened
}

// at is when what was first seen; ok is false if never.
func (s *stopwatch) at(what string) (time.Duration, bool) {
	d, ok := s.seen[what]
	return d, ok
}

// violations collects what a watch saw go wrong, keeping the first few.
type violations struct {
	mu    sync.Mutex
	n     int
	first []string
}

func (v *violations) add(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.n++
	if len(v.first) < 5 {
		v.first = append(v.first, fmt.Sprintf(format, args...))
	}
}

func (v *violations) report(t *testing.T, states int, invariant string) {
	t.Helper()
	if v.n > 0 {
		t.Errorf("%s: violated in %d of %d states, first: %v", invariant, v.n, states, v.first)
		return
	}
	t.Logf("%s: held in all %d states seen", invariant, states)
}
