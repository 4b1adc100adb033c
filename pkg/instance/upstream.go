package instance

import (
	"context"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// upstreamCheckEvery is how often a standby that does not stream asks its primary endpoint why.
const upstreamCheckEvery = 3 * time.Second

// upstreamCheck is what a standby that does not stream found when it tried its primary endpoint
// itself, over the replication protocol as its walreceiver would.
type upstreamCheck struct {
	endpoint string
	at       time.Time
	err      error
}

// checkUpstream runs from watchServer: while postgres runs as a standby and does not stream, it
// connects to the primary endpoint as the replication role every upstreamCheckEvery, so the
// status can say why (connection refused, a timeout, a password refused) instead of only "not
// streaming". Streaming clears it.
func (m *Manager) checkUpstream(ctx context.Context, running contract.Role, streaming bool) {
	endpoint := m.decisionEndpoint()
	if running != contract.RoleStandby || streaming || endpoint == "" {
		m.setUpstream(upstreamCheck{})
		return
	}
	m.mu.Lock()
	last := m.upstream
	m.mu.Unlock()
	if last.endpoint == endpoint && time.Since(last.at) < upstreamCheckEvery {
		return
	}
	check := upstreamCheck{endpoint: endpoint, at: time.Now()}
	up, tlsConfig, err := m.reachTLS(endpoint)
	if err != nil {
		check.err = err
	} else {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, check.err = pgsql.IdentifySystem(cctx, up.Host, up.Port, m.credentials().replication, tlsConfig)
		cancel()
	}
	m.setUpstream(check)
}

func (m *Manager) decisionEndpoint() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.decision.PrimaryEndpoint
}

func (m *Manager) setUpstream(c upstreamCheck) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.err != nil && (m.upstream.err == nil || m.upstream.err.Error() != c.err.Error()) {
		m.log.Info("The primary endpoint cannot be reached for replication", "primaryEndpoint", c.endpoint, "err", c.err.Error())
	}
	m.upstream = c
}
