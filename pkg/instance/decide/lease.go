package decide

import (
	"fmt"
	"strings"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// FenceLead is how long before the point at which writes must have stopped (contract.FenceSafety
// before the Lease expires) the fast shutdown starts, so that it has stopped new writes (postgres
// refuses connections and ends backends at once on a fast shutdown) by then; a shutdown still
// running at the point turns immediate.
const FenceLead = time.Second

// Lease is what the instance last read of the primary Lease.
type Lease struct {
	// Exists is false when the Lease was read and is absent (released or never created).
	Exists bool
	// Holder is spec.holderIdentity: "<cluster>/<epoch>".
	Holder string
	// RenewTime is spec.renewTime, on the writer's clock.
	RenewTime time.Time
	// Duration is spec.leaseDurationSeconds.
	Duration time.Duration
}

// LeaseJudgement says whether the Lease lets the instance write now, and until when.
type LeaseJudgement struct {
	// Valid: the Lease names the holder, is trusted, and now is before FenceAt.
	Valid bool
	// WritableUntil is renewTime + duration - contract.FenceSafety: by then writes have stopped. Zero when
	// the Lease does not name the holder or is not trusted.
	WritableUntil time.Time
	// FenceAt is WritableUntil - FenceLead: when the fast shutdown starts.
	FenceAt time.Time
	// Failsafe: the Lease itself is not valid (run out, or from a clock too far ahead) and the
	// instance may go on writing because it hears every standby of its membership (JudgeFailsafe).
	Failsafe bool
	// Reason and Message say why the Lease is not valid.
	Reason  contract.Reason
	Message string
}

// JudgeLease judges l for holder at now, on the instance's own clock.
func JudgeLease(l Lease, holder string, now time.Time) LeaseJudgement {
	switch {
	case !l.Exists:
		return LeaseJudgement{Reason: contract.ReasonLeaseNotHeld, Message: "the primary Lease does not exist"}
	case l.Holder != holder:
		return LeaseJudgement{Reason: contract.ReasonLeaseNotHeld,
			Message: fmt.Sprintf("the primary Lease names %q, not %q", l.Holder, holder)}
	case l.Duration <= 0 || l.RenewTime.IsZero():
		return LeaseJudgement{Reason: contract.ReasonLeaseNotHeld, Message: "the primary Lease has no renewTime or duration"}
	case l.RenewTime.After(now.Add(contract.MaxClockSkew)):
		return LeaseJudgement{Reason: contract.ReasonClockSkew,
			Message: fmt.Sprintf("the primary Lease's renewTime %s is %s in this instance's future (more than %s)",
				l.RenewTime.UTC().Format(time.RFC3339Nano), l.RenewTime.Sub(now).Round(time.Millisecond), contract.MaxClockSkew)}
	}
	j := LeaseJudgement{WritableUntil: l.RenewTime.Add(l.Duration - contract.FenceSafety)}
	j.FenceAt = j.WritableUntil.Add(-FenceLead)
	if !now.Before(j.FenceAt) {
		j.Reason = contract.ReasonFenced
		j.Message = fmt.Sprintf("the primary Lease (renewed %s for %s) runs out: writes stop %s before it expires",
			l.RenewTime.UTC().Format(time.RFC3339Nano), l.Duration, contract.FenceSafety)
		return j
	}
	j.Valid = true
	return j
}

// Failsafe is what a running primary last heard of its standbys (pkg/instance/contact).
type Failsafe struct {
	// Members are the standbys it must hear from; Unheard those it has not heard within
	// contract.FailsafeWindow.
	Members, Unheard []string
	// Until is when the earliest of its hearings gets older than the window (zero while a
	// member is unheard).
	Until time.Time
}

// JudgeFailsafe lets a running primary whose Lease, naming it, can no longer be renewed (it ran
// out, or a wrong clock made it untrusted) go on taking writes while it hears every standby of
// its membership: until contract.FenceSafety before the earliest hearing gets older than the
// window. j is the Lease's own judgement, which it returns when the failsafe does not reach
// further. It never applies to a Lease that is gone (a demotion releases it) or names another
// holder (a newer epoch), and the caller applies it only to a primary already running at its
// epoch: nothing starts writable on it. A standby promoted in a failover waits for silence long
// enough that this primary has stopped by then (docs/failover.md).
func JudgeFailsafe(j LeaseJudgement, l Lease, holder string, fs Failsafe, now time.Time) LeaseJudgement {
	if !l.Exists || l.Holder != holder || fs.Until.IsZero() {
		return j
	}
	until := fs.Until.Add(-contract.FenceSafety)
	if j.Valid && !until.After(j.WritableUntil) {
		return j
	}
	out := LeaseJudgement{WritableUntil: until, FenceAt: until.Add(-FenceLead)}
	if !now.Before(out.FenceAt) {
		return j
	}
	out.Valid = true
	if !j.Valid {
		out.Failsafe = true
		out.Reason = contract.ReasonFailsafe
		out.Message = fmt.Sprintf("%s; taking writes while every standby answers (%s)", j.Message, membersOrNone(fs.Members))
	}
	return out
}

func membersOrNone(members []string) string {
	if len(members) == 0 {
		return "it has none"
	}
	return strings.Join(members, ", ")
}
