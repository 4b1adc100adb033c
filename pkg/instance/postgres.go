package instance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// errBackoff: an attempt to start postgres came too soon after the last one.
var errBackoff = errors.New("waiting before starting postgres again")

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
	s := pgconf.Settings{Port: m.opts.PostgresPort, ListenAddresses: m.opts.ListenAddresses, ClusterName: m.opts.PodName,
		TLS: pgconf.TLSPaths(m.dataDir)}
	a := pgconf.Auth{Superuser: m.credentials().superuser.Username, Replication: m.credentials().replication.Username,
		SuperuserFromNetwork: m.opts.SuperuserFromNetwork}
	if m.archive != nil {
		s.Archive, a.SuperuserBySocket = m.archive.settings(m.self, m.opts.ArchiveTimeout), true
	}
	return pgconf.Write(m.dataDir, s, a, m.owner)
}

// withConn runs f on the manager's own superuser connection to the local postgres, waiting (up
// to a minute) for postgres to accept connections. The connection is opened on first use and
// kept: a primary syncs its slots once a second, and a connection of its own each time (a
// backend forked, a SCRAM exchange) was most of what the manager asked of postgres; on a
// starved machine those logins took seconds each, while the readings that date the failsafe's
// hearing waited behind them for the CPU. A kept connection found broken (postgres stopped or
// restarted since) is opened again and f run once more on the new one: every f is idempotent.
// Calls are serialised; the fence never comes here.
func (m *Manager) withConn(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	m.admin.Lock()
	defer m.admin.Unlock()
	for retried := false; ; retried = true {
		conn, err := m.adminConnLocked(ctx)
		if err != nil {
			return err
		}
		err = f(ctx, conn)
		if err == nil || !conn.IsClosed() {
			return err
		}
		m.admin.conn = nil
		if retried {
			return err
		}
	}
}

// adminConnLocked is the kept connection, opened (waiting for postgres to accept connections)
// when there is none or it was closed.
func (m *Manager) adminConnLocked(ctx context.Context) (*pgx.Conn, error) {
	if c := m.admin.conn; c != nil && !c.IsClosed() {
		return c, nil
	}
	m.admin.conn = nil
	cfg, err := pgsql.ConnConfig(m.connectHost(), m.opts.PostgresPort, m.credentials().superuser.Username, m.credentials().superuser.Password, "postgres", nil)
	if err != nil {
		return nil, err
	}
	for {
		conn, err := pgsql.Connect(ctx, cfg)
		if err == nil {
			m.admin.conn = conn
			return conn, nil
		}
		if !m.proc.Running() {
			return nil, fmt.Errorf("postgres exited: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
