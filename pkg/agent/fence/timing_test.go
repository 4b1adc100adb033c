package fence

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestSecondsRoundTowardSafety(t *testing.T) {
	for _, tc := range []struct {
		d        time.Duration
		down, up int32
	}{
		{15 * time.Second, 15, 15},
		{15*time.Second + 900*time.Millisecond, 15, 16},
		{1500 * time.Millisecond, 1, 2},
		{time.Second + time.Nanosecond, 1, 2},
		{900 * time.Millisecond, 0, 1},
		{0, 0, 0},
		{-time.Second, 0, 0},
		{time.Duration(math.MaxInt64), math.MaxInt32, math.MaxInt32},
	} {
		if got := SecondsDown(tc.d); got != tc.down {
			t.Errorf("SecondsDown(%s) = %d, want %d", tc.d, got, tc.down)
		}
		if got := SecondsUp(tc.d); got != tc.up {
			t.Errorf("SecondsUp(%s) = %d, want %d", tc.d, got, tc.up)
		}
	}
}

func TestValidateTimings(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		heartbeat, fenceAfter time.Duration
		want                  string // empty: valid
	}{
		{"defaults", 5 * time.Second, 15 * time.Second, ""},
		{"one second", 500 * time.Millisecond, time.Second, ""},
		{"fractional above a second", 500 * time.Millisecond, 1500 * time.Millisecond, ""},
		{"sub-second", 500 * time.Millisecond, 900 * time.Millisecond, "--fence-after must be at least 1s, got 900ms"},
		{"zero", time.Second, 0, "--fence-after must be positive"},
		{"not longer than the heartbeat", 5 * time.Second, 5 * time.Second, "--fence-after (5s) must be longer than --heartbeat-interval (5s)"},
		{"no heartbeat", 0, 15 * time.Second, "--heartbeat-interval must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := errors.Join(ValidateTimings(tc.heartbeat, tc.fenceAfter)...)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ValidateTimings(%s, %s) = %v, want nil", tc.heartbeat, tc.fenceAfter, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("ValidateTimings(%s, %s) = %v, want an error containing %q", tc.heartbeat, tc.fenceAfter, err, tc.want)
			}
		})
	}
}
