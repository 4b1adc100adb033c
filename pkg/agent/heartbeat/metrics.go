package heartbeat

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// renewalSeconds is how long each hub Lease renewal took, and renewals how they ended: the margin
// between the heartbeat interval and fenceAfter is what a slow hub API server eats into before
// the agent fences its primaries.
var (
	renewalSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dbfleet_agent_hub_lease_renewal_seconds",
		Help:    "Duration of the agent's hub Lease renewals, successful or not.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30},
	})
	renewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dbfleet_agent_hub_lease_renewals_total",
		Help: "Hub Lease renewals by result (ok or error).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(renewalSeconds, renewals)
}
