package member

import (
	"testing"
	"time"
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
