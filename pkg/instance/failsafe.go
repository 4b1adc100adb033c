package instance

import (
	"fmt"
	"strings"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// probe is a primary's reading of its WAL insert position, taken before the server's reading
// (ok false when it failed).
type probe struct {
	at  time.Time
	lsn contract.LSN
	ok  bool
}

// noteContact feeds one reading of the server, which ended at end, to the failsafe's two
// counters: a primary's hearing of its standbys (its probe, then their replies), and a
// standby's silence. The write check that follows a primary's reading commits a transaction,
// so there is always WAL past the probe for the standbys to acknowledge.
func (m *Manager) noteContact(running contract.Role, srv pgsql.Server, p probe, end time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if running != contract.RolePrimary || srv.InRecovery {
		m.hearing.Reset()
		m.silence.Observe(end, srv.Connected)
		return
	}
	m.silence.Observe(end, false)
	m.lastReading = end
	if p.ok {
		m.hearing.Probe(p.at, p.lsn)
	}
	for _, r := range srv.Replication {
		if lsn, err := contract.ParseLSN(r.WriteLSN); err == nil {
			m.hearing.Reply(r.ApplicationName, lsn)
		}
	}
}

// noteStopped records a reading that found postgres stopped: no walreceiver, nothing heard.
func (m *Manager) noteStopped(end time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hearing.Reset()
	m.silence.Observe(end, false)
}

// noteUnknown records a reading of a running server that failed: a standby counts it as contact.
func (m *Manager) noteUnknown(running contract.Role, end time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if running != contract.RolePrimary {
		m.silence.Unknown(end)
	}
}

// failsafeInputLocked judges a running primary's hearing of members (the pod's standbys) now;
// nothing is heard while postgres does not run as primary.
func (m *Manager) failsafeInputLocked(members []string, now time.Time) decide.Failsafe {
	if m.runningLocked() != contract.RolePrimary {
		return decide.Failsafe{}
	}
	j := m.hearing.Judge(members, contract.FailsafeWindow, now)
	return decide.Failsafe{Members: j.Members, Unheard: j.Unheard, Until: j.Until}
}

// silenceLocked is how long this instance has exchanged nothing with any primary.
func (m *Manager) silenceLocked(now time.Time) time.Duration { return m.silence.For(now) }

// failsafeNote says, for a fence's message, why the failsafe did not carry the primary on: off,
// postgres not running as primary at epoch, or when it last heard each standby of its membership
// (on a busy machine, which one fell behind tells a slow standby from a slow reading here).
func (m *Manager) failsafeNote(epoch int64) string {
	snap := m.obs.Snapshot()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	local := m.epochsLocked()
	switch {
	case !m.opts.Failsafe:
		return "failsafe off"
	case !decide.RunsAsPrimaryAt(local, snap.Pod, epoch):
		return fmt.Sprintf("no failsafe: postgres does not run as the primary of epoch %d", epoch)
	case len(snap.Standbys) == 0:
		return "failsafe: no standbys known"
	}
	heard := make([]string, 0, len(snap.Standbys))
	for _, s := range snap.Standbys {
		if at := m.hearing.Heard(s); at.IsZero() {
			heard = append(heard, s+" never heard")
		} else {
			heard = append(heard, fmt.Sprintf("%s heard %s ago", s, now.Sub(at).Round(100*time.Millisecond)))
		}
	}
	read := "no reading of the server yet"
	if !m.lastReading.IsZero() {
		read = fmt.Sprintf("last reading of the server %s ago", now.Sub(m.lastReading).Round(100*time.Millisecond))
	}
	return fmt.Sprintf("failsafe window %s: %s (%s)", contract.FailsafeWindow, strings.Join(heard, ", "), read)
}
