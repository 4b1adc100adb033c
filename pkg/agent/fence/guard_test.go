package fence

import (
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
