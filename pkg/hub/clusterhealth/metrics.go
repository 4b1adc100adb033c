package clusterhealth

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// detectionSeconds is how long a cluster's agent had been silent, on the hub's clock, when the
// hub marked the cluster Ready=Unknown: the grace period plus the hub's own reaction time.
var detectionSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "dbfleet_hub_cluster_failure_detection_seconds",
	Help:    "Time from the last observed agent lease renewal to the hub marking the cluster Ready=Unknown.",
	Buckets: prometheus.ExponentialBuckets(1, 1.5, 14), // 1 s .. ~3.2 min
})

func init() {
	metrics.Registry.MustRegister(detectionSeconds)
}
