package instance

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// credentials returns the credentials in use.
func (m *Manager) credentials() credentials {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.creds
}

// refreshCredentials re-reads the mounted Secrets, which the kubelet rewrites in place when a
// Secret is edited (or deleted and made again by the hub), and makes postgres follow them
// without a restart:
//   - a primary sets the roles' new passwords while the ones in use still log in;
//   - a standby only takes them up: the primary's ALTER ROLE reaches it as WAL, and its next
//     step writes primary_conninfo with the new replication password and reloads;
//   - new user names rewrite pg_hba.conf and reload;
//   - new certificates are copied beside the data directory, and postgres reloads.
//
// Secrets that cannot be read (a key missing or empty) change nothing: the instance keeps the
// credentials it has and says why in its status (CredentialsInvalid).
func (m *Manager) refreshCredentials(ctx context.Context) {
	next, err := m.opts.readCredentials()
	if err != nil {
		m.setCredsErr(fmt.Errorf("the mounted Secrets cannot be read, the last ones read stay in use: %w", err))
		return
	}
	cur := m.credentials()
	if next == cur {
		m.setCredsErr(nil)
		return
	}
	running := m.running()
	m.mu.Lock()
	rolesReady := m.rolesReady
	m.mu.Unlock()
	loginsChanged := next.superuser != cur.superuser || next.replication != cur.replication || next.app != cur.app
	if next.tls != cur.tls {
		// Certificates are rotated without a restart: postgres reads its certificate and key
		// again on a reload (connections open go on with theirs), libpq the client files on its
		// next connection.
		if _, err := pgconf.WriteTLS(m.dataDir, next.tls, m.owner); err != nil {
			m.setCredsErr(fmt.Errorf("write the new TLS files: %w", err))
			return
		}
		if running != contract.RoleStopped {
			if err := m.withConn(ctx, pgsql.Reload); err != nil {
				m.setCredsErr(fmt.Errorf("reload for the new TLS files: %w", err))
				return
			}
		}
		m.log.Info("TLS certificates changed", "reloaded", running != contract.RoleStopped)
	}
	if loginsChanged && running == contract.RolePrimary && rolesReady {
		// Bounded: the step that called this also fences and promotes.
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := m.withConn(cctx, func(ctx context.Context, conn *pgx.Conn) error {
			return pgsql.EnsureRoles(ctx, conn, next.superuser, next.replication, next.app)
		})
		if err != nil {
			m.setCredsErr(fmt.Errorf("set the edited Secrets' passwords: %w", err))
			return
		}
	}
	m.mu.Lock()
	m.creds, m.credsErr = next, nil
	m.mu.Unlock()
	if loginsChanged {
		m.log.Info("Credentials changed", "superuser", next.superuser.Username, "replication", next.replication.Username,
			"app", next.app.Username, "rolesSet", running == contract.RolePrimary && rolesReady)
	}
	if running != contract.RoleStopped &&
		(next.superuser.Username != cur.superuser.Username || next.replication.Username != cur.replication.Username) {
		if err := m.writeConfig(); err != nil {
			m.setCredsErr(err)
			return
		}
		if err := m.withConn(ctx, pgsql.Reload); err != nil {
			m.setCredsErr(err)
		}
	}
}

func (m *Manager) setCredsErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil && (m.credsErr == nil || m.credsErr.Error() != err.Error()) {
		m.log.Error(err, "Credentials")
	}
	m.credsErr = err
}
