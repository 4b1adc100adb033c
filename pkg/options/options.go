package options

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Manager are the options of a controller manager process.
type Manager struct {
	// Kubeconfig is the cluster the manager runs against; empty means in-cluster or $KUBECONFIG.
	Kubeconfig string
	// MetricsBindAddress serves Prometheus metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles; "0" (the default) disables it.
	PprofBindAddress string
	// KubeAPIQPS and KubeAPIBurst bound the client-side request rate to the API server; zero
	// leaves client-go's default (5 QPS, burst 10).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// ConcurrentReconciles is how many objects each controller reconciles at once.
	ConcurrentReconciles int
	// Zap configures logging.
	Zap zap.Options
}

// Client-side request limits by default. The hub writes for every database of the fleet: at
// client-go's 5 QPS it placed about 2 databases a second (docs/performance.md). An agent writes
// only for its own cluster's shares.
const (
	HubQPS   = 300
	HubBurst = 600
	// HubConcurrentReconciles overlaps the API round trips of different databases' reconciles;
	// one at a time, the hub placed about 5 databases a second whatever its QPS. More is not
	// better on a saturated API server: with 64 (for every hub controller) at 1,000 clusters,
	// hundreds of agents' Lease renewals queued, some were rejected after timing out, and
	// placement was slower than with 16.
	HubConcurrentReconciles = 16
	AgentQPS                = 20
	AgentBurst              = 40
	// AgentMemberQPS and AgentMemberBurst bound the agent's requests to its own member API
	// server, which serves little else. Each live primary's Lease is rewritten once a heartbeat
	// (5 s), and those writes come due together: at the hub's 20 QPS, an agent holding 33
	// primaries spent 1.6 s of every 5 s on them, a new database's StatefulSet waited behind
	// them (apply → StatefulSet p99 2.9 s on an idle fleet, docs/performance.md), and past 100
	// primaries the renewals alone would need more than 20 a second.
	AgentMemberQPS   = 100
	AgentMemberBurst = 200
	// AgentConcurrentReconciles lets an agent apply a new share while it carries the hub's
	// renewals into its live primaries' Leases: those passes come due together, one heartbeat
	// after the renewal they carry, and one at a time a new database's StatefulSet waited
	// behind some 30 of them (apply → StatefulSet p99 2.95 s on an idle fleet,
	// docs/performance.md). One share is still never reconciled twice at once.
	AgentConcurrentReconciles = 4
)

// Bounds on how long the hub's and the agent's requests may wait. kube-apiserver itself gives up
// on a request after a minute (its --request-timeout default), throttled ones included, so a
// client still waiting then is waiting on a connection that died without a word (HTTP/2 health
// checks notice that only after about 45 s, HTTP/1.1 never).
const (
	// RequestTimeout is the rest.Config.Timeout of a client that never watches (the hub
	// commands' clients). A config that also serves informers never gets one: client-go puts it
	// on the http.Client, whose timeout covers reading the whole body, so it would cut every
	// watch at that age.
	RequestTimeout = time.Minute
	// ReconcileTimeout is the deadline of each reconcile of the hub's and the agent's controllers
	// (config.Controller.ReconciliationTimeout), and so of every request a reconcile makes
	// through the manager's clients, whose config serves the informers too. A healthy pass takes
	// well under a second; one that has waited this long is retried rather than hold its worker.
	ReconcileTimeout = time.Minute
)

// NewManager returns the defaults: metrics on :8080, probes on :8081, production logging.
func NewManager() *Manager {
	return &Manager{
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		PprofBindAddress:       "0",
		ConcurrentReconciles:   1,
	}
}

// AddFlags registers the options on fs.
func (o *Manager) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"Path to the kubeconfig of the cluster to run against. Empty: in-cluster config, then $KUBECONFIG.")
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		`Address the Prometheus metrics endpoint binds to, e.g. ":8080" or "127.0.0.1:8080"; "0" disables it.`)
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		`Address the /healthz and /readyz endpoints bind to; "0" disables them.`)
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress,
		`Address Go's /debug/pprof profiling endpoints bind to, e.g. "127.0.0.1:6060"; "0" disables them.`)
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Queries per second the manager may send to the API server (client-side limit).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Requests the manager may send in a burst above --kube-api-qps.")
	fs.IntVar(&o.ConcurrentReconciles, "concurrent-reconciles", o.ConcurrentReconciles,
		"How many objects each controller reconciles at once (never the same object twice).")
	zapFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	o.Zap.BindFlags(zapFlags)
	fs.AddGoFlagSet(zapFlags)
}

// Validate reports every bad value at once.
func (o *Manager) Validate() error {
	var errs []error
	if err := ValidateBindAddress(o.MetricsBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--metrics-bind-address: %w", err))
	}
	if err := ValidateBindAddress(o.HealthProbeBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--health-probe-bind-address: %w", err))
	}
	if err := ValidateBindAddress(o.PprofBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--pprof-bind-address: %w", err))
	}
	if o.ConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("--concurrent-reconciles must be at least 1, got %d", o.ConcurrentReconciles))
	}
	if o.KubeAPIQPS < 0 || o.KubeAPIBurst < 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps (%v) and --kube-api-burst (%d) must not be negative", o.KubeAPIQPS, o.KubeAPIBurst))
	}
	return errors.Join(errs...)
}

// ValidateBindAddress accepts "0" (disabled) or host:port with a numeric port.
func ValidateBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port or \"0\": %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q has an invalid port: %w", addr, err)
	}
	return nil
}

// RESTConfig loads --kubeconfig, or the in-cluster config and $KUBECONFIG when it is empty.
func (o *Manager) RESTConfig() (*rest.Config, error) {
	cfg, err := o.loadConfig()
	if err != nil {
		return nil, err
	}
	if o.KubeAPIQPS > 0 {
		cfg.QPS = o.KubeAPIQPS
	}
	if o.KubeAPIBurst > 0 {
		cfg.Burst = o.KubeAPIBurst
	}
	return cfg, nil
}

func (o *Manager) loadConfig() (*rest.Config, error) {
	if o.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("load --kubeconfig %s: %w", o.Kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig given and no in-cluster config or $KUBECONFIG: %w", err)
	}
	return cfg, nil
}
