package hub

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
)

// metricSum adds up every series of a metric family in the controller-runtime registry whose
// labels include all of want.
func metricSum(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	series:
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

func statusWrites(t *testing.T) float64 {
	return metricSum(t, "dbfleet_hub_databasecluster_status_writes_total", nil)
}

func reconcileCount(t *testing.T) float64 {
	return metricSum(t, "controller_runtime_reconcile_total", map[string]string{"controller": databasecluster.Name})
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
