package instance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
)

// errFenced: the instance fenced itself at this epoch meanwhile.
var errFenced = errors.New("fenced at this epoch")

// fenceAtDeadline is the guard's: the Lease deadline of epoch came. A renewal the observer has
// read since the guard was armed (the loop was busy: a promotion, a slow reload) moves the
// deadline instead: the guard fences at the deadline of the last Lease known, not of the one
// known when it was armed.
func (m *Manager) fenceAtDeadline(epoch int64, writableUntil time.Time) {
	// Read the Lease again first, within the lead the guard left: a renewal the poll has not
	// fetched yet (a busy machine, a slow API server) is not a lost Lease.
	ctx, cancel := context.WithTimeout(context.Background(), decide.FenceLead/2)
	_ = m.obs.Refresh(ctx)
	cancel()
	if j := m.judgeWrites(epoch); j.Valid {
		m.guard.arm(epoch, j)
		return
	}
	m.fence(epoch, contract.ReasonFenced, fmt.Sprintf("no Lease renewal seen before the deadline; writes stop by %s (%s)",
		writableUntil.UTC().Format(time.RFC3339Nano), m.failsafeNote(epoch)))
}

// fence records epoch as fenced and stops postgres: fast, immediate at the last deadline known.
func (m *Manager) fence(epoch int64, reason contract.Reason, msg string) {
	m.mu.Lock()
	wasFenced := m.fenced
	if epoch > m.state.FencedEpoch {
		s := m.state
		s.Pod, s.FencedEpoch = m.opts.PodName, epoch
		if err := pgconf.WriteState(m.dataDir, s, m.owner); err != nil {
			m.log.Error(err, "Recording the fenced epoch failed; fencing anyway")
		}
		m.state = s
	}
	running := m.proc.Running()
	asPrimary := running && m.mode == contract.RolePrimary
	promoted := m.state.PromotedEpoch
	if running {
		m.fenced = true
	}
	m.mu.Unlock()
	if !running {
		return
	}
	immediateAt := m.guard.deadline()
	if immediateAt.IsZero() || time.Until(immediateAt) > 10*time.Second {
		immediateAt = time.Now().Add(10 * time.Second)
	}
	if !wasFenced {
		m.log.Info("Fencing: stopping postgres", "epoch", epoch, "reason", reason, "message", msg, "immediateAt", immediateAt)
	}
	m.guard.disarm()
	m.proc.Stop(immediateAt)
	m.log.Info("Fenced", "epoch", epoch)
	if asPrimary {
		m.recordDemotion(context.Background(), promoted)
	}
}
