package member

import (
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

func TestLookAfterKeepsAThirdOfTheLeaseInHand(t *testing.T) {
	const fenceAfter = 15 * time.Second
	for _, tc := range []struct {
		name        string
		until, want time.Duration
	}{
		{"just renewed: come back with 5 s of the Lease left", 15 * time.Second, 10 * time.Second},
		{"renewed 4 s ago", 11 * time.Second, 6 * time.Second},
		{"no newer renewal inside the last third: come back to fence at the deadline", 4 * time.Second, 4 * time.Second},
		{"exactly a third left", 5 * time.Second, 5 * time.Second},
		{"deadline passed: look again soon", -time.Second, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lookAfter(tc.until, fenceAfter, 0); got != tc.want {
				t.Errorf("lookAfter(%s, %s, 0) = %s, want %s", tc.until, fenceAfter, got, tc.want)
			}
		})
	}
}

// With the heartbeat known, the Lease is rewritten as soon as a fresher renewal can exist, so the
// instance manager (which fences contract.FenceSafety before the end) always sees most of it left:
// at the defaults one heartbeat after the carried renewal, and with a short fenceAfter never a
// third of it (2.7 s of 8 s, which fenced healthy primaries on real nodes).
func TestLookAfterCarriesEachRenewalWithinAHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		fenceAfter, renewEvery, want time.Duration
	}{
		{"defaults: 15 s, heartbeat 5 s", 15 * time.Second, 5 * time.Second, 5 * time.Second},
		{"short: 8 s, heartbeat 1 s", 8 * time.Second, time.Second, time.Second},
		{"shortest: 3 s, heartbeat 1 s", 3 * time.Second, time.Second, time.Second},
		{"heartbeat unknown, 8 s: leaseInHand", 8 * time.Second, 0, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lookAfter(tc.fenceAfter, tc.fenceAfter, tc.renewEvery) // just renewed
			if got != tc.want {
				t.Errorf("lookAfter(%s, %s, %s) = %s, want %s", tc.fenceAfter, tc.fenceAfter, tc.renewEvery, got, tc.want)
			}
			if left := tc.fenceAfter - got; tc.fenceAfter >= 8*time.Second && left < contract.FenceSafety+3*time.Second {
				t.Errorf("the Lease is rewritten with %s left: the instance manager fences at %s left", left, contract.FenceSafety)
			}
		})
	}
	// No newer renewal within the last keep: the next look is the deadline, to fence.
	if got := lookAfter(2*time.Second, 8*time.Second, time.Second); got != 2*time.Second {
		t.Errorf("lookAfter(2s, 8s, 1s) = %s, want the deadline, 2s", got)
	}
}
