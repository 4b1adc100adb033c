package fence

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestGuardFreshUntilFenceAfterFromTheLastRenewalStart(t *testing.T) {
	const fenceAfter = 15 * time.Second
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := clocktesting.NewFakeClock(start)
	g := NewGuard(clock, fenceAfter)

	// A freshly started agent has one fenceAfter for its first renewal, and no renewal to carry.
	if !g.Fresh() || !g.Deadline().Equal(start.Add(fenceAfter)) || !g.LastRenewStart().IsZero() {
		t.Fatalf("new guard: fresh %v, deadline %s, last renewal %s", g.Fresh(), g.Deadline(), g.LastRenewStart())
	}
	clock.Step(fenceAfter)
	if g.Fresh() {
		t.Fatal("fresh at the deadline with no renewal since start: the deadline itself is stale")
	}

	// A renewal that started 2 s ago counts from its start, not its end.
	renewStart := clock.Now().Add(-2 * time.Second)
	g.Renewed(renewStart)
	if !g.Deadline().Equal(renewStart.Add(fenceAfter)) || !g.LastRenewStart().Equal(renewStart) || !g.Fresh() {
		t.Fatalf("after renewal: deadline %s, last %s, fresh %v", g.Deadline(), g.LastRenewStart(), g.Fresh())
	}
	// A renewal that started earlier but finished later never moves the deadline back.
	g.Renewed(renewStart.Add(-time.Second))
	if !g.LastRenewStart().Equal(renewStart) {
		t.Errorf("an older renewal moved the last renewal start to %s", g.LastRenewStart())
	}
	clock.Step(fenceAfter - 2*time.Second - time.Nanosecond)
	if !g.Fresh() {
		t.Error("stale a nanosecond before the deadline")
	}
	clock.Step(time.Nanosecond)
	if g.Fresh() {
		t.Error("fresh at fenceAfter after the renewal's start")
	}
	if g.FenceAfter() != fenceAfter {
		t.Errorf("FenceAfter() = %s", g.FenceAfter())
	}
}

// Each renewal that moves the deadline wakes every waiter, once; an older one wakes nobody.
func TestGuardWakesWaitersOnEachRenewal(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	g := NewGuard(clock, 15*time.Second)
	first, second := g.NextRenewal(), g.NextRenewal()
	g.Renewed(clock.Now())
	for i, ch := range []<-chan struct{}{first, second} {
		select {
		case <-ch:
		default:
			t.Errorf("waiter %d not woken by a renewal", i)
		}
	}
	next := g.NextRenewal()
	g.Renewed(clock.Now().Add(-time.Second))
	select {
	case <-next:
		t.Error("an older renewal woke a waiter")
	default:
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if g.RenewedAfter(ctx, g.LastRenewStart()) {
		t.Error("RenewedAfter reported a renewal that never came")
	}
	if !g.RenewedAfter(context.Background(), clock.Now().Add(-time.Second)) {
		t.Error("RenewedAfter missed a renewal already made")
	}
	done := make(chan bool)
	since := g.LastRenewStart()
	go func() { done <- g.RenewedAfter(context.Background(), since) }()
	clock.Step(time.Second)
	g.Renewed(clock.Now())
	if !<-done {
		t.Error("RenewedAfter did not see the renewal it waited for")
	}
}

// Requests for a renewal out of turn never block and add up to one.
func TestGuardRenewalRequestsCoalesce(t *testing.T) {
	g := NewGuard(clocktesting.NewFakeClock(time.Now()), 15*time.Second)
	g.RequestRenewal()
	g.RequestRenewal()
	<-g.RenewalRequests()
	select {
	case <-g.RenewalRequests():
		t.Error("two requests made two renewals")
	default:
	}
}
