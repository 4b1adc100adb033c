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
	return pgconf.Write(m.dataDir,
		pgconf.Settings{Port: m.opts.PostgresPort, ListenAddresses: m.opts.ListenAddresses, ClusterName: m.opts.PodName,
			TLS: pgconf.TLSPaths(m.dataDir)},
		pgconf.Auth{Superuser: m.credentials().superuser.Username, Replication: m.credentials().replication.Username,
			SuperuserFromNetwork: m.opts.SuperuserFromNetwork},
		m.owner)
}

// withConn runs f on a new superuser connection to the local postgres, waiting (up to a
// minute) for postgres to accept connections.
func (m *Manager) withConn(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cfg, err := pgsql.ConnConfig(m.connectHost(), m.opts.PostgresPort, m.credentials().superuser.Username, m.credentials().superuser.Password, "postgres", nil)
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
