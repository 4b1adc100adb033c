package app

import (
	"strings"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/options"
)

func TestRunFlagValidation(t *testing.T) {
	if err := newRunOptions().validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*runOptions)
		want   string
	}{
		{"empty lease namespace", func(o *runOptions) { o.leaderElectionNamespace = "" }, "--leader-election-namespace"},
		{"renew deadline beyond lease", func(o *runOptions) { o.renewDeadline = 20 * time.Second }, "--leader-elect-renew-deadline (20s)"},
		{"bad probe address", func(o *runOptions) { o.manager.HealthProbeBindAddress = "localhost" }, "--health-probe-bind-address"},
		{"negative toleration", func(o *runOptions) { o.defaultToleration = -time.Second }, "--default-unreachable-toleration must be whole seconds"},
		{"fractional toleration", func(o *runOptions) { o.defaultToleration = 1500 * time.Millisecond }, "--default-unreachable-toleration must be whole seconds"},
		{"negative eviction rate", func(o *runOptions) { o.hub.EvictionRate = -1 }, "--eviction-rate must not be negative"},
		{"zero eviction burst", func(o *runOptions) { o.hub.EvictionBurst = 0 }, "--eviction-burst must be at least 1"},
		{"zero unhealthy-cluster threshold", func(o *runOptions) { o.hub.UnhealthyClusterThreshold = 0 }, "--unhealthy-cluster-threshold must be above 0 and at most 1"},
		{"unhealthy-cluster threshold above 1", func(o *runOptions) { o.hub.UnhealthyClusterThreshold = 1.5 }, "--unhealthy-cluster-threshold must be above 0 and at most 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newRunOptions()
			tc.change(o)
			err := o.validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate() = %v, want error containing %q", err, tc.want)
			}
		})
	}
	o := newRunOptions()
	o.leaderElect, o.leaderElectionNamespace = false, ""
	if err := o.validate(); err != nil {
		t.Errorf("leader election settings checked although --leader-elect=false: %v", err)
	}
}

// Every hub controller runs --concurrent-reconciles workers and gives each reconcile a deadline.
func TestRunControllerOptions(t *testing.T) {
	o := newRunOptions()
	got := o.controllerOptions()
	if got.MaxConcurrentReconciles != options.HubConcurrentReconciles || got.ReconciliationTimeout != options.ReconcileTimeout {
		t.Errorf("controller options %+v, want %d workers and a %s deadline", got, options.HubConcurrentReconciles, options.ReconcileTimeout)
	}
}
