package member

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// primariesFenced counts the primaries the agent fenced because its hub lease went stale: each is
// a primary that stopped serving writes, and that the hub will promote again, here or elsewhere.
var primariesFenced = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "dbfleet_agent_primaries_fenced_total",
	Help: "Primaries the agent fenced because no hub Lease renewal succeeded within fenceAfter.",
})

// primariesLost counts the primary pods the agent counted lost (watchPrimary): each is a failover
// inside a healthy member cluster.
var primariesLost = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "dbfleet_agent_primaries_lost_total",
	Help: "Primary pods whose instance stopped serving for --primary-lost-after (or crash-looped) while the agent was healthy.",
})

func init() {
	metrics.Registry.MustRegister(primariesLost)
	metrics.Registry.MustRegister(primariesFenced)
}
