package hub

import (
	"strings"
	"testing"

	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/test/framework"
)

func statusWrites(t *testing.T) float64 {
	return framework.MetricSum(t, "dbfleet_hub_databasecluster_status_writes_total", nil)
}

func reconcileCount(t *testing.T) float64 {
	return framework.MetricSum(t, "controller_runtime_reconcile_total", map[string]string{"controller": databasecluster.Name})
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
