package member

import (
	"fmt"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// An instance judges its primary Lease on its own clock and refuses a renewTime more than
// contract.MaxClockSkew in its future, so an agent whose clock runs ahead of its pods' leaves its
// primary fenced however often it renews (and one running behind makes the Lease run out early).
// The agent cannot see that in the Lease; it sees it by comparing each instance's clock, which
// /status carries, with its own at the moment of the answer. It reports the share's ClockSkew
// condition, and the hub keeps the primary off a cluster whose clocks disagree.

// clockReading is how far an instance's clock was ahead of the agent's (negative: behind) when it
// answered /status, within ±uncertainty (half the round trip). ok is false when the answer had
// no time.
type clockReading struct {
	offset, uncertainty time.Duration
	ok                  bool
}

// readClock compares the instance's time (RFC 3339), written while answering, with the middle of
// the agent's request, from sent to received on the agent's clock.
func readClock(instanceTime string, sent, received time.Time) clockReading {
	t, err := time.Parse(time.RFC3339Nano, instanceTime)
	if err != nil || instanceTime == "" {
		return clockReading{}
	}
	half := received.Sub(sent) / 2
	return clockReading{offset: t.Sub(sent.Add(half)), uncertainty: half, ok: true}
}

// skewed says the clocks certainly disagree by more than contract.MaxClockSkew.
func (c clockReading) skewed() bool {
	return c.ok && c.offset.Abs()-c.uncertainty > contract.MaxClockSkew
}

// shareClocks sums up a share's readings: measured is false when no instance's clock was read;
// skewed names the instance furthest off among those certainly off, and msg says what was seen.
func shareClocks(reports []instanceReport) (measured, skewed bool, msg string) {
	var worst *instanceReport
	for i := range reports {
		r := &reports[i]
		if !r.clock.ok {
			continue
		}
		measured = true
		if worst == nil || r.clock.offset.Abs() > worst.clock.offset.Abs() {
			worst = r
		}
	}
	if worst == nil {
		return false, false, ""
	}
	c := worst.clock
	direction := "ahead of"
	if c.offset < 0 {
		direction = "behind"
	}
	seen := fmt.Sprintf("the clock of instance %s is %s %s the agent's (±%s)", worst.Pod, c.offset.Abs().Round(time.Millisecond), direction,
		c.uncertainty.Round(time.Millisecond))
	if !c.skewed() {
		return true, false, fmt.Sprintf("the instances' clocks agree with the agent's within %s: %s", contract.MaxClockSkew, seen)
	}
	return true, true, fmt.Sprintf("%s, more than the %s the primary Lease allows: a primary instance here refuses the Lease the agent renews "+
		"(or sees it run out early), so the hub keeps the primary off this cluster until the clocks agree", seen, contract.MaxClockSkew)
}
