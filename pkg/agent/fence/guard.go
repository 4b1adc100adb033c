package fence

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Guard knows whether the agent's hub lease is fresh. It is also where the heartbeat and the
// member side meet: the heartbeat tells it of each successful renewal, which wakes whoever waits
// for one (NextRenewal), and takes from it requests for a renewal out of turn (RequestRenewal).
type Guard struct {
	clock      clock.PassiveClock
	fenceAfter time.Duration
	// started gives a freshly started agent one fenceAfter to make its first renewal before it
	// fences; it renews no primary Lease until that renewal.
	started time.Time
	// renewEvery is the heartbeat interval: how often a fresher renewal can be carried forward.
	renewEvery time.Duration
	// wanted holds one request for a renewal now: requests made while one waits add nothing.
	wanted chan struct{}

	mu sync.Mutex
	// lastRenewStart is when the last successful hub renewal was started.
	lastRenewStart time.Time
	// renewed is closed when lastRenewStart next moves, then replaced: a broadcast to every
	// waiter, which never blocks the heartbeat and never loses a renewal for one who took the
	// channel before looking at LastRenewStart.
	renewed chan struct{}
}

// NewGuard returns a Guard for an agent starting now.
func NewGuard(c clock.PassiveClock, fenceAfter time.Duration) *Guard {
	return &Guard{clock: c, fenceAfter: fenceAfter, started: c.Now(), wanted: make(chan struct{}, 1), renewed: make(chan struct{})}
}

// WithRenewInterval records the heartbeat interval, how often the hub lease is renewed, so that
// each renewal is carried into the primary Leases soon after it happens; it returns g.
func (g *Guard) WithRenewInterval(d time.Duration) *Guard {
	g.renewEvery = d
	return g
}

// RenewInterval is the heartbeat interval, zero when not known.
func (g *Guard) RenewInterval() time.Duration { return g.renewEvery }

// Renewed records a successful hub renewal that started at start, and wakes whoever waits for it.
func (g *Guard) Renewed(start time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if start.After(g.lastRenewStart) {
		g.lastRenewStart = start
		close(g.renewed)
		g.renewed = make(chan struct{})
	}
}

// NextRenewal returns a channel closed once a renewal newer than LastRenewStart (as it is now)
// has succeeded. Take it before reading LastRenewStart, and no renewal can slip in between.
func (g *Guard) NextRenewal() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.renewed
}

// RequestRenewal asks the heartbeat to renew now rather than at its next tick. It never blocks:
// a request already waiting covers this one.
func (g *Guard) RequestRenewal() {
	select {
	case g.wanted <- struct{}{}:
	default:
	}
}

// RenewalRequests receives the requests RequestRenewal makes; the heartbeat reads it.
func (g *Guard) RenewalRequests() <-chan struct{} { return g.wanted }

// RenewedAfter waits until a renewal that started after t has succeeded, and reports whether
// one did before ctx ended.
func (g *Guard) RenewedAfter(ctx context.Context, t time.Time) bool {
	for {
		next := g.NextRenewal()
		if g.LastRenewStart().After(t) {
			return true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return false
		}
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

// Now is the time on the guard's clock, the agent's clock for everything the fence compares.
func (g *Guard) Now() time.Time { return g.clock.Now() }

// Fresh reports whether the deadline is still ahead.
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
