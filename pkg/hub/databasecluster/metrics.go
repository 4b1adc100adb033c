package databasecluster

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

var (
	schedulingSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dbfleet_hub_scheduling_duration_seconds",
		Help:    "Time the placement engine took for one DatabaseCluster.",
		Buckets: prometheus.ExponentialBuckets(0.00001, 4, 10), // 10µs .. ~2.6s
	})
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dbfleet_hub_placement_decisions_total",
		Help: "Placement decisions by result: Scheduled, Unschedulable, InvalidPlacement or NoPolicy.",
	}, []string{"result"})
	memberDatabaseWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dbfleet_hub_memberdatabase_writes_total",
		Help: "MemberDatabase writes by operation: create, update or delete.",
	}, []string{"operation"})
	statusWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dbfleet_hub_databasecluster_status_writes_total",
		Help: "DatabaseCluster status writes; flat while nothing changes.",
	})
	staleReads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dbfleet_hub_databasecluster_stale_cache_reads_total",
		Help: "Reconciles put off because the cache had not yet caught up with the hub's own last write of the DatabaseCluster.",
	})
	promotions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dbfleet_hub_primary_promotions_total",
		Help: "Primary promotions: failovers, switchovers and re-promotions after fencing.",
	})
	failoverSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dbfleet_hub_failover_duration_seconds",
		Help:    "Time from a DatabaseCluster's FailoverInProgress turning True (the primary's cluster lost, or a planned move begun) to the new primary being ready.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10), // 1s .. ~8.5min
	})
	evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dbfleet_hub_evictions_total",
		Help: "Shares moved off a cluster that still exists, by reason: ClusterFailure, ApplicationFailure or Migration.",
	}, []string{"reason"})
	evictionsDelayed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dbfleet_hub_evictions_delayed_total",
		Help: "Placements held back by the eviction rate limit (--eviction-rate, --eviction-burst).",
	})
	evictionsPaused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dbfleet_hub_evictions_paused_total",
		Help: "Placements held back because too many member clusters were not Ready at once (--unhealthy-cluster-threshold).",
	})
	readyReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dbfleet_databasecluster_ready_replicas",
		Help: "Ready replicas of a DatabaseCluster across the fleet, as aggregated by the hub.",
	}, []string{"namespace", "name"})
	desiredReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dbfleet_databasecluster_replicas",
		Help: "Desired replicas (spec.replicas) of a DatabaseCluster.",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(schedulingSeconds, decisions, memberDatabaseWrites, statusWrites, staleReads, promotions, failoverSeconds,
		evictions, evictionsDelayed, evictionsPaused, readyReplicas, desiredReplicas)
}

func recordReadiness(dbc *dbfleetv1alpha1.DatabaseCluster) {
	readyReplicas.WithLabelValues(dbc.Namespace, dbc.Name).Set(float64(dbc.Status.ReadyReplicas))
	desiredReplicas.WithLabelValues(dbc.Namespace, dbc.Name).Set(float64(dbc.Spec.Replicas))
}

func forgetReadiness(namespace, name string) {
	readyReplicas.DeleteLabelValues(namespace, name)
	desiredReplicas.DeleteLabelValues(namespace, name)
}
