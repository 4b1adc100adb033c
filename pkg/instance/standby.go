package instance

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

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

// standbyConf is what a standby of endpoint writes; an empty endpoint follows nobody.
func (m *Manager) standbyConf(endpoint string) (pgconf.Standby, error) {
	if endpoint == "" {
		return pgconf.Standby{}, nil
	}
	up, err := m.reach(endpoint)
	if err != nil {
		return pgconf.Standby{}, err
	}
	return pgconf.Standby{Upstream: up, User: m.credentials().replication.Username, Password: m.credentials().replication.Password,
		ApplicationName: m.opts.PodName, SlotName: pgconf.SlotName(m.opts.PodName)}, nil
}

// reach is how this instance reaches endpoint (host:port, a primary's) over TLS with libpq (the
// walreceiver, pg_basebackup, pg_rewind: the files beside the data directory).
func (m *Manager) reach(endpoint string) (pgconf.Upstream, error) {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return pgconf.Upstream{}, fmt.Errorf("primary endpoint %q: %w", endpoint, err)
	}
	return pgconf.Upstream{Host: host, Port: port, ServerName: contract.TLSServerName(m.opts.Database, m.opts.Namespace), TLS: pgconf.TLSPaths(m.dataDir)}, nil
}

// reachTLS is reach with the TLS configuration of the manager's own connections to endpoint,
// from the same material (parsed here: only the callers that connect themselves need it).
func (m *Manager) reachTLS(endpoint string) (pgconf.Upstream, *tls.Config, error) {
	up, err := m.reach(endpoint)
	if err != nil {
		return up, nil, err
	}
	t := m.credentials().tls
	tlsConfig, err := pgsql.ClientTLS(up.HostName(), []byte(t.CACert), []byte(t.ClientCert), []byte(t.ClientKey))
	return up, tlsConfig, err
}
