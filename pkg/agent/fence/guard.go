package fence

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Guard knows whether the agent's hub lease is fresh.
type Guard struct {
	clock      clock.PassiveClock
	fenceAfter time.Duration
	// started gives a freshly started agent one fenceAfter to make its first renewal before it
	// fences; it renews no primary Lease until that renewal.
	started time.Time
	// renewEvery is the heartbeat interval: how often a fresher renewal can be carried forward.
	renewEvery time.Duration

	mu sync.Mutex
	// lastRenewStart is when the last successful hub renewal was started.
	lastRenewStart time.Time
}

// NewGuard returns a Guard for an agent starting now.
func NewGuard(c clock.PassiveClock, fenceAfter time.Duration) *Guard {
	return &Guard{clock: c, fenceAfter: fenceAfter, started: c.Now()}
}

// WithRenewInterval records the heartbeat interval, how often the hub lease is renewed, so that
// each renewal is carried into the primary Leases soon after it happens; it returns g.
func (g *Guard) WithRenewInterval(d time.Duration) *Guard {
	g.renewEvery = d
	return g
}

// RenewInterval is the heartbeat interval, zero when not known.
func (g *Guard) RenewInterval() time.Duration { return g.renewEvery }

// Renewed records a successful hub renewal that started at start.
func (g *Guard) Renewed(start time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if start.After(g.lastRenewStart) {
		g.lastRenewStart = start
	}
}

// Deadline is when the agent must stop acting as a primary holder: fenceAfter after the start of
// its last successful hub renewal (or after it started, before the first one).
func (g *Guard) Deadline() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	from := g.lastRenewStart
	if from.IsZero() {
		from = g.started
	}
	return from.Add(g.fenceAfter)
}

// Fresh reports whether the deadline is still ahead.
// Now is the time on the guard's clock, the agent's clock for everything the fence compares.
func (g *Guard) Now() time.Time { return g.clock.Now() }

func (g *Guard) Fresh() bool { return g.clock.Now().Before(g.Deadline()) }

// LastRenewStart is the start of the last successful renewal.
func (g *Guard) LastRenewStart() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastRenewStart
}

// Started is when the agent started: no primary Lease it ever writes is renewed from before it.
func (g *Guard) Started() time.Time { return g.started }

// FenceAfter is the configured fence delay.
func (g *Guard) FenceAfter() time.Duration { return g.fenceAfter }
