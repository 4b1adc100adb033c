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
	up, _, err := m.reach(endpoint)
	if err != nil {
		return pgconf.Standby{}, err
	}
	return pgconf.Standby{Upstream: up, User: m.credentials().replication.Username, Password: m.credentials().replication.Password,
		ApplicationName: m.opts.PodName, SlotName: pgconf.SlotName(m.opts.PodName)}, nil
}

// reach is how this instance reaches endpoint (host:port, a primary's) over TLS: for libpq
// (the walreceiver, pg_basebackup, pg_rewind: the files beside the data directory) and for its
// own connections (a TLS configuration from the same material).
func (m *Manager) reach(endpoint string) (pgconf.Upstream, *tls.Config, error) {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return pgconf.Upstream{}, nil, fmt.Errorf("primary endpoint %q: %w", endpoint, err)
	}
	up := pgconf.Upstream{Host: host, Port: port, ServerName: contract.TLSServerName(m.opts.Database, m.opts.Namespace), TLS: pgconf.TLSPaths(m.dataDir)}
	t := m.credentials().tls
	tlsConfig, err := pgsql.ClientTLS(up.HostName(), []byte(t.CACert), []byte(t.ClientCert), []byte(t.ClientKey))
	if err != nil {
		return up, nil, err
	}
	return up, tlsConfig, nil
}
