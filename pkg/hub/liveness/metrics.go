package liveness

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of a silence check.
const (
	checkRenewed = "renewed" // the API server had a renewal the hub's watch had not delivered
	checkSilent  = "silent"  // confirmed: no renewal since the last one observed
	checkError   = "error"   // the Lease could not be read; the silence is not acted on
)

// silenceChecks counts the reads that confirm a silence before the hub acts on it. "renewed"
// counts lapses and promotions the hub would have got wrong from its watch alone.
var silenceChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "dbfleet_hub_lease_silence_checks_total",
	Help: "Reads of an agent's Lease from the API server before the hub acts on its silence, by result (renewed: the hub's watch was behind; silent: confirmed; error).",
}, []string{"result"})

func init() {
	metrics.Registry.MustRegister(silenceChecks)
}
