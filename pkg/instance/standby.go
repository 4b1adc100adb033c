package instance

import (
	"context"
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
