package member

import (
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/instance/decide"
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
			if got := lookAfter(tc.until, fenceAfter); got != tc.want {
				t.Errorf("lookAfter(%s, %s) = %s, want %s", tc.until, fenceAfter, got, tc.want)
			}
		})
	}
}

// A short fenceAfter still leaves the instance manager time to see the renewed Lease before its
// own fence point (decide.FenceSafety before the end): 5 s in hand, not a third of 8 s.
func TestLookAfterKeepsTheInstanceManagersMarginWithAShortFenceAfter(t *testing.T) {
	const fenceAfter = 8 * time.Second
	for _, tc := range []struct {
		name        string
		until, want time.Duration
	}{
		{"just renewed: come back with 5 s of the Lease left", 8 * time.Second, 3 * time.Second},
		{"renewed 2 s ago", 6 * time.Second, time.Second},
		{"no newer renewal inside the last 5 s: come back to fence at the deadline", 4 * time.Second, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lookAfter(tc.until, fenceAfter); got != tc.want {
				t.Errorf("lookAfter(%s, %s) = %s, want %s", tc.until, fenceAfter, got, tc.want)
			}
			if left := tc.until - lookAfter(tc.until, fenceAfter); tc.until > 5*time.Second && left < decide.FenceSafety+2*time.Second {
				t.Errorf("the Lease is rewritten with %s left: the instance manager fences at %s left", left, decide.FenceSafety)
			}
		})
	}
}
