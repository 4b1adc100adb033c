package liveness

import (
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
