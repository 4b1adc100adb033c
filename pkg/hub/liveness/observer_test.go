package liveness

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A cluster joined while the hub runs gets its full grace period from when the hub first knew
// it; a renewal then takes over, and a cluster known before the hub started counts from the start.
func TestSilenceOfANewClusterCountsFromWhenItWasKnown(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	o := NewObserver(clock)
	o.Known("old") // listed at start-up

	clock.Step(time.Minute)
	o.Known("new") // joined a minute after the hub started
	o.Known("new") // later reconciles do not move it
	clock.Step(5 * time.Second)
	o.Known("new")

	if silent, _ := o.SilentFor("new"); silent != 5*time.Second {
		t.Errorf("new cluster silent for %s, want 5s (since it was first known)", silent)
	}
	if silent, _ := o.SilentFor("old"); silent != 65*time.Second {
		t.Errorf("cluster known at start silent for %s, want 65s (since the hub started)", silent)
	}
	o.Observe("new", clock.Now().Add(-time.Hour)) // the agent's clock is off: only the change counts
	clock.Step(2 * time.Second)
	if silent, _ := o.SilentFor("new"); silent != 2*time.Second {
		t.Errorf("new cluster silent for %s after a renewal 2s ago, want 2s", silent)
	}
	o.Forget("new")
	if silent, _ := o.SilentFor("new"); silent != 67*time.Second {
		t.Errorf("forgotten cluster silent for %s, want 67s (since the hub started)", silent)
	}
}

// fakeLease is the API server's copy of one cluster's Lease, read by ConfirmedSilentFor.
type fakeLease struct {
	renewTime time.Time
	found     bool
	err       error
	reads     int
}

func (l *fakeLease) read(_ context.Context, _ string) (time.Time, bool, error) {
	l.reads++
	return l.renewTime, l.found, l.err
}

// A silence is confirmed with a read of the Lease before the hub acts on it: a renewal the
// watch had not delivered restarts it, an unchanged Lease confirms it until the next renewal is
// observed, and a failed read confirms nothing.
func TestASilenceIsConfirmedAgainstTheAPIServer(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	o := NewObserver(clock)
	lease := &fakeLease{}
	o.SetReader(lease.read)
	ctx := context.Background()
	const grace = 20 * time.Second

	first := clock.Now()
	o.Observe("east", first)
	lease.renewTime, lease.found = first, true
	clock.Step(10 * time.Second)
	if silent, err := o.ConfirmedSilentFor(ctx, "east", grace); err != nil || silent != 10*time.Second || lease.reads != 0 {
		t.Fatalf("below the threshold: silent %s, err %v, %d reads; want 10s, no error, no read", silent, err, lease.reads)
	}

	// The watch fell behind: the API server has a renewal the hub never heard.
	clock.Step(15 * time.Second)
	lease.renewTime = first.Add(20 * time.Second)
	if silent, err := o.ConfirmedSilentFor(ctx, "east", grace); err != nil || silent != 0 || lease.reads != 1 {
		t.Fatalf("with an unheard renewal: silent %s, err %v, %d reads; want 0, no error, 1 read", silent, err, lease.reads)
	}
	// The watch catches up with that same renewal later: it is not a new one.
	clock.Step(3 * time.Second)
	o.Observe("east", lease.renewTime)
	if silent, _ := o.SilentFor("east"); silent != 3*time.Second {
		t.Errorf("after the watch delivered the renewal already read: silent %s, want 3s", silent)
	}

	// Real silence: confirmed by one read at half the grace period, which does not stand for the
	// whole grace period; the read at the grace period does, for good.
	clock.Step(grace/2 - 3*time.Second)
	if silent, err := o.ConfirmedSilentFor(ctx, "east", grace/2); err != nil || silent != grace/2 || lease.reads != 2 {
		t.Fatalf("suspect: silent %s, err %v, %d reads; want %s, no error, 2 reads", silent, err, lease.reads, grace/2)
	}
	clock.Step(grace / 2)
	if silent, err := o.ConfirmedSilentFor(ctx, "east", grace); err != nil || silent != grace || lease.reads != 3 {
		t.Fatalf("a silent agent: silent %s, err %v, %d reads; want %s, no error, 3 reads", silent, err, lease.reads, grace)
	}
	clock.Step(time.Minute)
	if silent, err := o.ConfirmedSilentFor(ctx, "east", grace); err != nil || silent != grace+time.Minute || lease.reads != 3 {
		t.Errorf("asked again a minute later: silent %s, err %v, %d reads; want the confirmation to stand (3 reads)", silent, err, lease.reads)
	}
	// A renewal observed ends it: the next silence is confirmed afresh.
	lease.renewTime = lease.renewTime.Add(time.Minute)
	o.Observe("east", lease.renewTime)
	clock.Step(grace)
	if _, err := o.ConfirmedSilentFor(ctx, "east", grace); err != nil || lease.reads != 4 {
		t.Errorf("silent again after a renewal: err %v, %d reads; want a new read (4)", err, lease.reads)
	}

	// A read that fails confirms nothing.
	lease.renewTime = lease.renewTime.Add(time.Minute)
	o.Observe("east", lease.renewTime)
	clock.Step(grace)
	lease.err = errors.New("connection refused")
	if _, err := o.ConfirmedSilentFor(ctx, "east", grace); err == nil {
		t.Error("a failed read confirmed the silence; want an error")
	}

	// A cluster whose Lease is gone (or never written) is silent since the hub first knew it.
	o.Known("west")
	clock.Step(grace)
	lease.err, lease.found = nil, false
	if silent, err := o.ConfirmedSilentFor(ctx, "west", grace); err != nil || silent != grace {
		t.Errorf("no Lease: silent %s, err %v; want %s, no error", silent, err, grace)
	}
}

// The first renew time the hub sees (its start-up list) is not a renewal; a changed one is, and
// the same value delivered again is not; a forgotten cluster starts over.
func TestOnlyAChangedRenewTimeIsARenewal(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	o := NewObserver(clock)
	renewed := clock.Now().Add(-time.Hour)
	if o.Renewed("a") {
		t.Error("a cluster never observed counts as renewed")
	}
	o.Observe("a", renewed)
	if o.Renewed("a") {
		t.Error("the first renew time seen counts as a renewal")
	}
	o.Observe("a", renewed)
	if o.Renewed("a") {
		t.Error("the same renew time delivered again counts as a renewal")
	}
	o.Observe("a", renewed.Add(time.Second))
	if !o.Renewed("a") {
		t.Error("a changed renew time does not count as a renewal")
	}
	o.Forget("a")
	o.Observe("a", renewed.Add(2*time.Second))
	if o.Renewed("a") {
		t.Error("after Forget, the first renew time seen counts as a renewal")
	}
}
