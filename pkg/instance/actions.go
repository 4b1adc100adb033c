package instance

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/observe"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// cloneDirSuffix names the directory a clone is made in, beside the data directory; it becomes
// the data directory only once pg_basebackup has finished.
const cloneDirSuffix = ".clone"

// cloneAppSuffix makes pg_basebackup's application_name: "<pod>-clone".
const cloneAppSuffix = "-clone"

// errBackoff: an attempt to start postgres came too soon after the last one.
var errBackoff = errors.New("waiting before starting postgres again")

// errFenced: the instance fenced itself at this epoch meanwhile.
var errFenced = errors.New("fenced at this epoch")

type mismatchError struct{ local, primary, endpoint string }

func (e *mismatchError) Error() string {
	return fmt.Sprintf("the data directory belongs to database system %s, but the primary at %s is %s: refusing to start (nothing is deleted)",
		e.local, e.endpoint, e.primary)
}

// bootstrap initialises the first primary's data directory and starts it.
func (m *Manager) bootstrap(ctx context.Context, d decide.Decision) error {
	pwfile := filepath.Join(m.opts.DataVolume, ".dbfleet-initdb-pwfile")
	if err := os.WriteFile(pwfile, []byte(m.credentials().superuser.Password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write initdb password file: %w", err)
	}
	defer os.Remove(pwfile)
	if m.owner != nil {
		if err := os.Chown(pwfile, m.owner.UID, m.owner.GID); err != nil {
			return fmt.Errorf("chown initdb password file: %w", err)
		}
	}
	m.log.Info("Initialising the data directory", "dataDir", m.dataDir, "epoch", d.Epoch)
	if err := m.bins.InitDB(ctx, m.dataDir, m.credentials().superuser.Username, pwfile); err != nil {
		return err
	}
	if err := m.recordPromoted(d.Epoch); err != nil {
		return err
	}
	return m.startPrimary(ctx, d, m.obs.Snapshot().Synchronous)
}

// clone copies the primary into the (empty) data directory.
func (m *Manager) clone(ctx context.Context, d decide.Decision) error {
	host, port, err := net.SplitHostPort(d.PrimaryEndpoint)
	if err != nil {
		return fmt.Errorf("primary endpoint %q: %w", d.PrimaryEndpoint, err)
	}
	tmp := m.dataDir + cloneDirSuffix
	// Only an unfinished clone of ours can be there: it never held a database that ran.
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove unfinished clone %s: %w", tmp, err)
	}
	m.log.Info("Cloning the primary", "primaryEndpoint", d.PrimaryEndpoint)
	r := m.credentials().replication
	// Not the pod name: pg_basebackup's WAL stream would count as the synchronous standby of that
	// name, and confirm commits into a copy that is thrown away if the clone fails.
	if err := m.bins.BaseBackup(ctx, tmp, host, port, r.Username, r.Password, m.opts.PodName+cloneAppSuffix); err != nil {
		return err
	}
	if err := pgconf.RemoveState(tmp); err != nil {
		return err
	}
	if err := os.Remove(m.dataDir); err != nil {
		return fmt.Errorf("replace the empty data directory with the clone: %w", err)
	}
	if err := os.Rename(tmp, m.dataDir); err != nil {
		return fmt.Errorf("move the clone into place: %w", err)
	}
	m.log.Info("Cloned the primary", "primaryEndpoint", d.PrimaryEndpoint)
	return nil
}

// runStandby keeps postgres running as a standby following d.PrimaryEndpoint.
func (m *Manager) runStandby(ctx context.Context, d decide.Decision) error {
	sb, err := m.standbyConf(d.PrimaryEndpoint)
	if err != nil {
		return err
	}
	if m.running() == contract.RoleStandby {
		changed, err := pgconf.WriteStandby(m.dataDir, sb, m.owner)
		if err != nil || !changed {
			return err
		}
		m.log.Info("Following a new primary endpoint", "primaryEndpoint", d.PrimaryEndpoint)
		return m.withConn(ctx, pgsql.Reload)
	}
	if err := m.checkSystemIdentifier(ctx, d.PrimaryEndpoint); err != nil {
		return err
	}
	if recloning, err := m.rejoin(ctx, d); err != nil || recloning {
		return err
	}
	if err := m.writeConfig(); err != nil {
		return err
	}
	if _, err := pgconf.WriteStandby(m.dataDir, sb, m.owner); err != nil {
		return err
	}
	if err := pgconf.SetStandbySignal(m.dataDir, true, m.owner); err != nil {
		return err
	}
	return m.start(contract.RoleStandby, 0)
}

// divergedDirPrefix starts the name of a data directory set aside because it could not be
// rewound: <volume>/pgdata.diverged-<epoch>.
const divergedDirPrefix = DataDirName + ".diverged-"

// rejoin makes a data directory that was primary since it last followed anyone (it may hold
// writes that no other instance has: the old primary of a failover) a copy of the primary at
// d.PrimaryEndpoint from where their histories forked, with pg_rewind, before it starts as that
// primary's standby. When pg_rewind fails, the directory is moved aside, whole, to
// <volume>/pgdata.diverged-<its promoted epoch> (never deleted: it may hold acknowledged writes)
// and an empty one takes its place, which the next step clones; it then returns true. An
// unreachable primary is no failure of pg_rewind: it returns the error and retries.
func (m *Manager) rejoin(ctx context.Context, d decide.Decision) (bool, error) {
	m.mu.Lock()
	st := m.state
	m.mu.Unlock()
	if d.PrimaryEndpoint == "" || st.PromotedEpoch <= st.RejoinedEpoch {
		return false, nil
	}
	host, port, err := net.SplitHostPort(d.PrimaryEndpoint)
	if err != nil {
		return false, fmt.Errorf("primary endpoint %q: %w", d.PrimaryEndpoint, err)
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = pgsql.IdentifySystem(ictx, host, port, m.credentials().replication)
	cancel()
	if err != nil {
		return false, &rejoinError{fmt.Errorf("a former primary (epoch %d) rewinds before it follows %s, which cannot be reached: %w",
			st.PromotedEpoch, d.PrimaryEndpoint, err)}
	}
	su := m.credentials().superuser
	// A primary just promoted has its new timeline in its control file only after its first
	// checkpoint: before it, pg_rewind sees one timeline and finds nothing to undo. The same holds
	// of an endpoint that is not primary yet (the hub names a promoted pod before it has
	// promoted): rewound against it, a former primary holding writes the new primary never got
	// would be told "no rewind required" and stall on the new timeline. So it waits for one.
	if err := checkpointPrimary(ctx, host, port, su); err != nil {
		return false, &rejoinError{fmt.Errorf("a former primary (epoch %d) rewinds before it follows %s: %w", st.PromotedEpoch, d.PrimaryEndpoint, err)}
	}
	m.log.Info("Rewinding a former primary to follow the new one", "promotedEpoch", st.PromotedEpoch, "epoch", d.Epoch, "primaryEndpoint", d.PrimaryEndpoint)
	said, err := m.bins.Rewind(ctx, m.dataDir, host, port, su.Username, su.Password)
	if err == nil {
		method := contract.RejoinRewound
		if strings.Contains(said, "no rewind required") {
			method = contract.RejoinNoRewindNeeded
		}
		// pg_rewind copied the primary's files over this directory's, the state file among them.
		m.mu.Lock()
		defer m.mu.Unlock()
		next := m.state
		next.Pod, next.RejoinedEpoch = m.opts.PodName, d.Epoch
		if err := pgconf.WriteState(m.dataDir, next, m.owner); err != nil {
			return false, err
		}
		m.state = next
		m.rejoined = &contract.Rejoin{Epoch: d.Epoch, Method: method, Message: said}
		m.log.Info("Rewound", "method", method, "said", said)
		return false, nil
	}
	if ctx.Err() != nil {
		return false, err
	}
	aside, merr := m.moveAside(st.PromotedEpoch)
	if merr != nil {
		return false, fmt.Errorf("%w; and the data directory could not be moved aside: %w", err, merr)
	}
	m.log.Error(err, "pg_rewind failed: the data directory is kept aside and the new primary cloned afresh", "divergedData", aside)
	m.mu.Lock()
	// The new, empty directory was never primary; the fence stays remembered.
	m.state = pgconf.State{Pod: m.opts.PodName, FencedEpoch: m.state.FencedEpoch}
	m.rejoined = &contract.Rejoin{Epoch: d.Epoch, Method: contract.RejoinRecloned, DivergedData: aside, Message: err.Error()}
	m.mu.Unlock()
	return true, nil
}

// checkpointPrimary runs CHECKPOINT on the server at host:port as the superuser, once it runs
// as primary: a server still in recovery is an error.
func checkpointPrimary(ctx context.Context, host, port string, su pgsql.Credentials) error {
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("port %q: %w", port, err)
	}
	cfg, err := pgsql.ConnConfig(host, p, su.Username, su.Password, "postgres")
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgsql.Connect(cctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var inRecovery bool
	if err := conn.QueryRow(cctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
		return fmt.Errorf("ask %s whether it is in recovery: %w", net.JoinHostPort(host, port), err)
	}
	if inRecovery {
		return fmt.Errorf("%s does not run as primary yet", net.JoinHostPort(host, port))
	}
	if _, err := conn.Exec(cctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("CHECKPOINT on %s: %w", net.JoinHostPort(host, port), err)
	}
	return nil
}

// rejoinError is a rejoin that waits (the new primary out of reach).
type rejoinError struct{ err error }

func (e *rejoinError) Error() string { return e.err.Error() }
func (e *rejoinError) Unwrap() error { return e.err }

// moveAside renames the data directory to <volume>/pgdata.diverged-<epoch> (a free name) and
// puts an empty one in its place.
func (m *Manager) moveAside(epoch int64) (string, error) {
	base := filepath.Join(m.opts.DataVolume, fmt.Sprintf("%s%d", divergedDirPrefix, epoch))
	aside := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(aside); errors.Is(err, os.ErrNotExist) {
			break
		}
		aside = fmt.Sprintf("%s.%d", base, i)
	}
	if err := os.Rename(m.dataDir, aside); err != nil {
		return "", fmt.Errorf("move %s to %s: %w", m.dataDir, aside, err)
	}
	return aside, m.prepareVolume()
}

// divergedDirs lists the data directories kept aside on the volume.
func (m *Manager) divergedDirs() []string {
	dirs, _ := filepath.Glob(filepath.Join(m.opts.DataVolume, divergedDirPrefix+"*"))
	return dirs
}

// standbyConf is what a standby of endpoint writes; an empty endpoint follows nobody.
func (m *Manager) standbyConf(endpoint string) (pgconf.Standby, error) {
	sb := pgconf.Standby{User: m.credentials().replication.Username, Password: m.credentials().replication.Password,
		ApplicationName: m.opts.PodName, SlotName: pgconf.SlotName(m.opts.PodName)}
	if endpoint == "" {
		return pgconf.Standby{}, nil
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return sb, fmt.Errorf("primary endpoint %q: %w", endpoint, err)
	}
	sb.Host, sb.Port = host, port
	return sb, nil
}

// checkSystemIdentifier refuses a data directory of another database than the primary's. An
// unreachable primary is no refusal: the standby starts and postgres' walreceiver checks too.
func (m *Manager) checkSystemIdentifier(ctx context.Context, endpoint string) error {
	if endpoint == "" {
		return nil
	}
	m.mu.Lock()
	last := m.mismatch
	m.mu.Unlock()
	if last.endpoint == endpoint && time.Since(last.at) < mismatchRecheck {
		return last.err
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return fmt.Errorf("primary endpoint %q: %w", endpoint, err)
	}
	ctl, err := m.bins.ControlData(ctx, m.dataDir)
	if err != nil {
		return err
	}
	var result error
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	primary, err := pgsql.IdentifySystem(ictx, host, port, m.credentials().replication)
	switch {
	case err != nil:
		m.log.Info("Cannot ask the primary for its system identifier; starting anyway", "err", err.Error())
	case primary != ctl.SystemIdentifier:
		result = &mismatchError{local: ctl.SystemIdentifier, primary: primary, endpoint: endpoint}
	}
	m.mu.Lock()
	m.mismatch = mismatchCheck{endpoint: endpoint, at: time.Now(), err: result}
	m.mu.Unlock()
	return result
}

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

// judgeLease judges the Lease as last read for epoch, now.
func (m *Manager) judgeLease(epoch int64) decide.LeaseJudgement {
	return decide.JudgeLease(m.obs.Snapshot().Lease, decide.Holder(m.opts.Cluster, epoch), time.Now())
}

// start starts postgres as mode, unless the instance fenced itself at epoch meanwhile (the
// guard may fire while the loop is on its way here).
func (m *Manager) start(mode contract.Role, epoch int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mode == contract.RolePrimary && m.state.FencedEpoch >= epoch {
		return errFenced
	}
	if time.Since(m.lastStart) < restartBackoff {
		return errBackoff
	}
	crashed := m.proc.Crashed()
	m.lastStart = time.Now()
	if err := m.proc.Start(); err != nil {
		return err
	}
	if crashed {
		m.restarts++
	}
	m.mode, m.fenced, m.rolesReady = mode, false, false
	m.server = contract.Status{} // nothing read from this postmaster yet
	m.log.Info("Started postgres", "as", mode, "epoch", epoch)
	return nil
}

// writeConfig writes dbfleet.conf and pg_hba.conf.
func (m *Manager) writeConfig() error {
	return pgconf.Write(m.dataDir,
		pgconf.Settings{Port: m.opts.PostgresPort, ListenAddresses: m.opts.ListenAddresses, ClusterName: m.opts.PodName},
		pgconf.Auth{Superuser: m.credentials().superuser.Username, Replication: m.credentials().replication.Username,
			SuperuserFromNetwork: m.opts.SuperuserFromNetwork},
		m.owner)
}

// withConn runs f on a new superuser connection to the local postgres, waiting (up to a
// minute) for postgres to accept connections.
func (m *Manager) withConn(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cfg, err := pgsql.ConnConfig(m.connectHost(), m.opts.PostgresPort, m.credentials().superuser.Username, m.credentials().superuser.Password, "postgres")
	if err != nil {
		return err
	}
	for {
		conn, err := pgsql.Connect(ctx, cfg)
		if err == nil {
			defer conn.Close(context.Background())
			return f(ctx, conn)
		}
		if !m.proc.Running() {
			return fmt.Errorf("postgres exited: %w", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
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

// fenceAtDeadline is the guard's: the Lease deadline of epoch came. A renewal the observer has
// read since the guard was armed (the loop was busy: a promotion, a slow reload) moves the
// deadline instead: the guard fences at the deadline of the last Lease known, not of the one
// known when it was armed.
func (m *Manager) fenceAtDeadline(epoch int64, writableUntil time.Time) {
	if j := m.judgeLease(epoch); j.Valid {
		m.guard.arm(epoch, j)
		return
	}
	m.fence(epoch, contract.ReasonFenced, fmt.Sprintf("no Lease renewal seen before the deadline; writes stop by %s",
		writableUntil.UTC().Format(time.RFC3339Nano)))
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
