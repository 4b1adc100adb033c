package fence

import (
	"fmt"
	"math"
	"time"
)

// MinFenceAfter is the shortest fenceAfter the agent accepts. A Lease counts in whole seconds,
// and the member-local primary Lease must never outlive fenceAfter, so anything shorter would be
// a Lease of 0 s, which the API server refuses (and which would let no primary write).
const MinFenceAfter = time.Second

// ValidateTimings checks the agent's --heartbeat-interval and --fence-after, naming the flags:
// the agent and hub join (which writes them into the agent's manifests) refuse the same values.
func ValidateTimings(heartbeatInterval, fenceAfter time.Duration) []error {
	var errs []error
	if heartbeatInterval <= 0 {
		errs = append(errs, fmt.Errorf("--heartbeat-interval must be positive, got %s", heartbeatInterval))
	}
	switch {
	case fenceAfter <= 0:
		errs = append(errs, fmt.Errorf("--fence-after must be positive, got %s", fenceAfter))
	case fenceAfter < MinFenceAfter:
		errs = append(errs, fmt.Errorf("--fence-after must be at least %s, got %s: Leases count whole seconds, and the primary Lease may not outlive it",
			MinFenceAfter, fenceAfter))
	case fenceAfter <= heartbeatInterval:
		errs = append(errs, fmt.Errorf("--fence-after (%s) must be longer than --heartbeat-interval (%s), or the agent fences between two heartbeats",
			fenceAfter, heartbeatInterval))
	}
	return errs
}

// SecondsDown is d in whole seconds rounded down, for a Lease that must end no later than d
// after its renewal: the member-local primary Lease (15.9 s of fenceAfter is a 15 s Lease).
func SecondsDown(d time.Duration) int32 {
	return clampSeconds(d / time.Second)
}

// SecondsUp is d in whole seconds rounded up, for what others wait on before they act: the hub
// waits for the fenceAfter the agent reports, so 1.5 s is reported as 2 s, never as 1 s.
func SecondsUp(d time.Duration) int32 {
	s := d / time.Second
	if d%time.Second > 0 {
		s++
	}
	return clampSeconds(s)
}

func clampSeconds(s time.Duration) int32 {
	switch {
	case s > math.MaxInt32:
		return math.MaxInt32
	case s < 0:
		return 0
	}
	return int32(s)
}
