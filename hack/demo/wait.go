package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The watcher polls the federation every second: it prints what changed (the timeline), redraws
// the live table, and records when each milestone of the phase first held.

const pollInterval = time.Second

// milestone is something the demo expects to happen.
type milestone struct {
	name string
	cond func(*snapshot) bool
	// hold is how long cond must hold without a break (0: once is enough).
	hold time.Duration

	since time.Time     // start of the current stretch in which cond holds
	at    time.Duration // when it happened, from the phase start
	done  bool
}

type watcher struct {
	f          *federation
	prev       *snapshot
	milestones []*milestone
}

// expect registers a milestone of the current phase.
func (w *watcher) expect(name string, hold time.Duration, cond func(*snapshot) bool) *milestone {
	m := &milestone{name: name, cond: cond, hold: hold}
	w.milestones = append(w.milestones, m)
	return m
}

// poll observes once, narrates and updates the milestones.
func (w *watcher) poll(ctx context.Context) *snapshot {
	s := w.f.observe(ctx)
	if w.prev != nil {
		for _, line := range changes(w.prev, s) {
			event("%s", line)
		}
	}
	w.prev = s
	for _, m := range w.milestones {
		if m.done {
			continue
		}
		if !m.cond(s) {
			m.since = time.Time{}
			continue
		}
		if m.since.IsZero() {
			m.since = s.at
		}
		if s.at.Sub(m.since) >= m.hold {
			m.done, m.at = true, m.since.Sub(out.phaseStart).Round(100*time.Millisecond)
			event("✔ %s", m.name)
		}
	}
	out.live(render(s))
	return s
}

// wait polls until m happened. The deadline counts from the start of the phase; missing it is
// an error that says what did not happen.
func (w *watcher) wait(ctx context.Context, m *milestone, deadline time.Duration, hint string) (*snapshot, error) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		s := w.poll(ctx)
		if m.done {
			return s, nil
		}
		if time.Since(out.phaseStart) > deadline {
			out.settle()
			msg := fmt.Sprintf("%s did not happen within %s", m.name, deadline)
			if hint != "" {
				msg += ": " + hint
			}
			return s, fmt.Errorf("%s", msg)
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-tick.C:
		}
	}
}

// timeline prints the phase's milestones in the order they happened.
func (w *watcher) timeline(title string) {
	done := slices.Clone(w.milestones)
	done = slices.DeleteFunc(done, func(m *milestone) bool { return !m.done })
	slices.SortStableFunc(done, func(a, b *milestone) int { return int(a.at - b.at) })
	var b strings.Builder
	fmt.Fprintf(&b, "  %s\n", title)
	for _, m := range done {
		fmt.Fprintf(&b, "    +%5.1fs  %s\n", m.at.Seconds(), m.name)
	}
	say("%s", strings.TrimRight(b.String(), "\n"))
	w.milestones = nil
}
