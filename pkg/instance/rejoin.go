package instance

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

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
	up, tlsConfig, err := m.reachTLS(d.PrimaryEndpoint)
	if err != nil {
		return false, err
	}
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = pgsql.IdentifySystem(ictx, up.Host, up.Port, m.credentials().replication, tlsConfig)
	cancel()
	if err != nil {
		return false, &rejoinError{fmt.Errorf("a former primary (epoch %d) rewinds before it follows %s, which cannot be reached: %w",
			st.PromotedEpoch, d.PrimaryEndpoint, err)}
	}
	// As the replication role, not the superuser: it holds pg_checkpoint and pg_rewind's
	// functions (pgsql.EnsureRoles grants them), and the superuser logs in only from loopback.
	repl := m.credentials().replication
	// A primary just promoted has its new timeline in its control file only after its first
	// checkpoint: before it, pg_rewind sees one timeline and finds nothing to undo. The same holds
	// of an endpoint that is not primary yet (the hub names a promoted pod before it has
	// promoted): rewound against it, a former primary holding writes the new primary never got
	// would be told "no rewind required" and stall on the new timeline. So it waits for one.
	if err := checkpointPrimary(ctx, up.Host, up.Port, repl, tlsConfig); err != nil {
		if pgsql.IsInsufficientPrivilege(err) {
			// PostgreSQL 14 and older: only a superuser may CHECKPOINT, and the superuser does
			// not log in from another host. Without the checkpoint pg_rewind could be told that
			// nothing needs undoing, so this directory is not rewound: it is kept aside and the
			// new primary cloned.
			return m.cloneAfresh(st, d, fmt.Errorf("the replication role may not CHECKPOINT %s (PostgreSQL 15 grants pg_checkpoint): %w", d.PrimaryEndpoint, err))
		}
		return false, &rejoinError{fmt.Errorf("a former primary (epoch %d) rewinds before it follows %s: %w", st.PromotedEpoch, d.PrimaryEndpoint, err)}
	}
	m.log.Info("Rewinding a former primary to follow the new one", "promotedEpoch", st.PromotedEpoch, "epoch", d.Epoch, "primaryEndpoint", d.PrimaryEndpoint)
	said, err := m.bins.Rewind(ctx, m.dataDir, up, repl.Username, repl.Password)
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
	return m.cloneAfresh(st, d, err)
}

// cloneAfresh moves a data directory that could not be rewound (why) aside, whole, and leaves an
// empty one for the next step to clone the new primary into; it returns true.
func (m *Manager) cloneAfresh(st pgconf.State, d decide.Decision, why error) (bool, error) {
	aside, err := m.moveAside(st.PromotedEpoch)
	if err != nil {
		return false, fmt.Errorf("%w; and the data directory could not be moved aside: %w", why, err)
	}
	m.log.Error(why, "Not rewound: the data directory is kept aside and the new primary cloned afresh", "divergedData", aside)
	m.mu.Lock()
	// The new, empty directory was never primary; the fence stays remembered.
	m.state = pgconf.State{Pod: m.opts.PodName, FencedEpoch: m.state.FencedEpoch}
	m.rejoined = &contract.Rejoin{Epoch: d.Epoch, Method: contract.RejoinRecloned, DivergedData: aside, Message: why.Error()}
	m.mu.Unlock()
	return true, nil
}

// checkpointPrimary runs CHECKPOINT on the server at host:port as role c (the superuser or a
// member of pg_checkpoint), once it runs as primary: a server still in recovery is an error.
func checkpointPrimary(ctx context.Context, host, port string, c pgsql.Credentials, tlsConfig *tls.Config) error {
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("port %q: %w", port, err)
	}
	cfg, err := pgsql.ConnConfig(host, p, c.Username, c.Password, "postgres", tlsConfig)
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
