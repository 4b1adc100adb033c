package instance

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/observe"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// promote ends recovery at d.Epoch (or, already primary, adopts d.Epoch).
func (m *Manager) promote(ctx context.Context, d decide.Decision) error {
	if m.running() == contract.RoleStandby {
		// The standby's synchronous_standby_names came with its clone (the old primary's) or
		// from nobody: set this primary's before it may take a write.
		if err := m.syncSynchronous(ctx, m.obs.Snapshot().Synchronous, true); err != nil {
			return err
		}
		if err := m.allowWrites(d); err != nil {
			return err
		}
		// pg_ctl promote needs the postmaster's PID file: a standby started a moment ago (a
		// fenced primary promoted again comes up as a standby just before) may not have it yet.
		if err := m.withConn(ctx, func(ctx context.Context, conn *pgx.Conn) error { return conn.Ping(ctx) }); err != nil {
			return fmt.Errorf("waiting for the standby to accept connections before promoting it: %w", err)
		}
		m.log.Info("Promoting", "epoch", d.Epoch)
		if err := m.bins.Promote(ctx, m.dataDir); err != nil {
			return err
		}
		m.mu.Lock()
		m.mode = contract.RolePrimary
		m.mu.Unlock()
	}
	// The roles came with the data from the primary this standby followed.
	m.setRolesReady()
	if err := m.recordPromoted(d.Epoch); err != nil {
		return err
	}
	m.log.Info("Primary", "epoch", d.Epoch)
	return nil
}

// runPrimary keeps postgres running as primary, its synchronous_standby_names and its slots in
// step with the standbys.
func (m *Manager) runPrimary(ctx context.Context, d decide.Decision, snap observe.Snapshot) error {
	if m.running() != contract.RolePrimary {
		if err := m.startPrimary(ctx, d, snap.Synchronous); err != nil {
			return err
		}
	}
	m.ensureStanza(ctx)
	if err := m.syncSynchronous(ctx, snap.Synchronous, true); err != nil {
		return err
	}
	return m.syncSlots(ctx, snap.Standbys)
}

// syncSlots keeps a physical replication slot for each of standbys (but this pod), checked once
// a second and whenever the list changes. A primary does so for its standbys; so does a standby whose pod is the promoted
// primary pod while it waits to promote (its Lease, the old primary's final LSN): the hub points
// the other standbys at it as soon as it promotes the pod, and they stream from it by their
// slots, cascading, through the promotion and onto its new timeline, so that a synchronous
// primary's first commit finds a standby already streaming. Without the slot each of them
// retried every wal_retrieve_retry_interval until the promotion and a second more.
func (m *Manager) syncSlots(ctx context.Context, standbys []string) error {
	m.mu.Lock()
	slots := make([]string, 0, len(standbys))
	for _, s := range standbys {
		if s != m.opts.PodName {
			slots = append(slots, pgconf.SlotName(s))
		}
	}
	// Once a second, and at once when the standbys change: the annotation naming them may come
	// a moment after the role that makes this pod keep their slots.
	due := time.Since(m.slotsSync) >= time.Second || !slices.Equal(slots, m.slotsSynced)
	m.mu.Unlock()
	if !due {
		return nil
	}
	err := m.withConn(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		created, dropped, err := pgsql.SyncSlots(ctx, conn, pgconf.SlotPrefix, slots)
		if len(created)+len(dropped) > 0 {
			m.log.Info("Replication slots", "created", created, "dropped", dropped)
		}
		return err
	})
	if err == nil {
		m.mu.Lock()
		m.slotsSync, m.slotsSynced = time.Now(), slots
		m.mu.Unlock()
	}
	return err
}

// syncSynchronous writes synchronous_standby_names as the pod asks, judged against the standbys
// that stream as last read, and reloads postgres when it changed and reload is set.
func (m *Manager) syncSynchronous(ctx context.Context, want decide.Synchronous, reload bool) error {
	m.mu.Lock()
	replicas := m.server.Replication
	if m.serverAs != contract.RolePrimary {
		replicas = nil // a standby's reading, or none yet: nobody is known to stream
	}
	m.mu.Unlock()
	names, _ := decide.PlanSynchronous(want, m.opts.PodName, replicas)
	changed, err := pgconf.WriteSynchronous(m.dataDir, names, m.owner)
	if err != nil || !changed || !reload {
		return err
	}
	m.log.Info("Synchronous standbys", "synchronousStandbyNames", names)
	return m.withConn(ctx, pgsql.Reload)
}

// startPrimary starts postgres out of recovery and sets the roles from the Secrets.
func (m *Manager) startPrimary(ctx context.Context, d decide.Decision, sync decide.Synchronous) error {
	if err := m.writeConfig(); err != nil {
		return err
	}
	// Before the first write: a required primary never acknowledges a commit alone.
	if err := m.syncSynchronous(ctx, sync, false); err != nil {
		return err
	}
	if _, err := pgconf.WriteStandby(m.dataDir, pgconf.Standby{}, m.owner); err != nil {
		return err
	}
	if err := pgconf.SetStandbySignal(m.dataDir, false, m.owner); err != nil {
		return err
	}
	if err := m.allowWrites(d); err != nil {
		return err
	}
	if err := m.start(contract.RolePrimary, d.Epoch); err != nil {
		return err
	}
	c := m.credentials()
	err := m.withConn(ctx, func(ctx context.Context, conn *pgx.Conn) error {
		return pgsql.EnsureRoles(ctx, conn, c.superuser, c.replication, c.app)
	})
	if err != nil {
		return err
	}
	m.setRolesReady()
	return nil
}

// setRolesReady lets /readyz say ready: the roles of the Secrets exist on this primary.
func (m *Manager) setRolesReady() {
	m.mu.Lock()
	m.rolesReady = true
	m.mu.Unlock()
}

// allowWrites arms the fence timer before postgres may take a write, judging the Lease afresh:
// the decision may be seconds old (an initdb, a clone), and the Lease renewed or lost since.
func (m *Manager) allowWrites(d decide.Decision) error {
	j := m.judgeLease(d.Epoch)
	if !j.Valid {
		return fmt.Errorf("no valid Lease at epoch %d: %s", d.Epoch, j.Message)
	}
	m.guard.arm(d.Epoch, j)
	return nil
}

// judgeLease judges the Lease as last read for epoch, now: what lets postgres start writable.
func (m *Manager) judgeLease(epoch int64) decide.LeaseJudgement {
	return decide.JudgeLease(m.obs.Snapshot().Lease, decide.Holder(m.opts.Cluster, epoch), time.Now())
}

// judgeWrites judges what keeps a running primary at epoch writable now: its Lease as last read
// and, when that is no longer valid, its failsafe (decide.JudgeFailsafe).
func (m *Manager) judgeWrites(epoch int64) decide.LeaseJudgement {
	snap := m.obs.Snapshot()
	holder, now := decide.Holder(m.opts.Cluster, epoch), time.Now()
	j := decide.JudgeLease(snap.Lease, holder, now)
	m.mu.Lock()
	local := m.epochsLocked()
	fs := m.failsafeInputLocked(snap.Standbys, now)
	m.mu.Unlock()
	if m.opts.Failsafe && decide.RunsAsPrimaryAt(local, snap.Pod, epoch) {
		j = decide.JudgeFailsafe(j, snap.Lease, holder, fs, now)
	}
	return j
}

// epochsLocked is what postgres runs as and the epochs the data directory records: what the
// failsafe's judgements of this instance need of decide.Local.
func (m *Manager) epochsLocked() decide.Local {
	return decide.Local{Running: m.runningLocked(), PromotedEpoch: m.state.PromotedEpoch, FencedEpoch: m.state.FencedEpoch}
}

// recordPromoted records that this data directory became primary at epoch.
func (m *Manager) recordPromoted(epoch int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.state
	s.Pod, s.PromotedEpoch = m.opts.PodName, epoch
	if err := pgconf.WriteState(m.dataDir, s, m.owner); err != nil {
		return err
	}
	m.state = s
	return nil
}
