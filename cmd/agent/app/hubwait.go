package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

var (
	hubReachable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dbfleet_agent_hub_reachable",
		Help: "1 once the agent has reached the hub and found the dbfleet API there; 0 while it waits for the hub at start-up.",
	})
	hubAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dbfleet_agent_hub_connection_attempts_total",
		Help: "Attempts to reach the hub at start-up, by result (ok, error).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(hubReachable, hubAttempts)
}

// hubBackoff spaces the attempts to reach the hub: from 1 s, doubling, up to 10 s apart.
var hubBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 10 * time.Second}

// waitForHub returns once the hub serves the dbfleet API to the agent's credential and the
// member cluster's API server answers discovery, trying again with backoff for as long as either
// does not (the hub may come up after the agent, or be cut off for a while; the member's API
// server may be restarting with its whole cluster): without them the agent's manager cannot map
// its kinds and would exit at once.
// Meanwhile /healthz answers ok (the process is fine, restarting it would not help), /readyz
// says what fails, and /metrics has dbfleet_agent_hub_reachable at 0, on the addresses the
// manager takes over afterwards. It returns early only when ctx ends, with ctx's error.
func waitForHub(ctx context.Context, hubCfg, memberCfg *rest.Config, probeAddr, metricsAddr string) error {
	log := ctrl.LoggerFrom(ctx)
	discoveryFor := func(c *rest.Config) (*discovery.DiscoveryClient, error) {
		c = rest.CopyConfig(c)
		c.Timeout = hubBackoff.Cap // a server that does not answer must not hold up the next try for long
		return discovery.NewDiscoveryClientForConfig(c)
	}
	disco, err := discoveryFor(hubCfg)
	if err != nil {
		return fmt.Errorf("hub discovery client: %w", err)
	}
	memberDisco, err := discoveryFor(memberCfg)
	if err != nil {
		return fmt.Errorf("member discovery client: %w", err)
	}
	check := func() error {
		_, err := disco.ServerResourcesForGroupVersion(dbfleetv1alpha1.GroupVersion.String())
		if err != nil {
			hubAttempts.WithLabelValues("error").Inc()
			return fmt.Errorf("the hub at %s does not serve %s to this agent: %w", hubCfg.Host, dbfleetv1alpha1.GroupVersion, err)
		}
		hubAttempts.WithLabelValues("ok").Inc()
		if _, err := memberDisco.ServerGroups(); err != nil {
			return fmt.Errorf("the member cluster's API server at %s does not answer discovery: %w", memberCfg.Host, err)
		}
		return nil
	}
	err = check()
	if err == nil {
		hubReachable.Set(1)
		return nil
	}
	hubReachable.Set(0)
	log.Error(err, "Hub not reachable; retrying with backoff")
	var mu sync.Mutex
	last := err
	status := func() error {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	stop, err := serveWhileWaiting(probeAddr, metricsAddr, status)
	if err != nil {
		return err
	}
	defer stop()
	backoff := hubBackoff
	for {
		delay := backoff.Step()
		select {
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for the hub (%v): %w", status(), ctx.Err())
		case <-time.After(delay):
		}
		err := check()
		if err == nil {
			break
		}
		log.Error(err, "Hub still not reachable; retrying with backoff", "retryIn", backoff.Duration)
		mu.Lock()
		last = err
		mu.Unlock()
	}
	hubReachable.Set(1)
	log.Info("Reached the hub")
	return nil
}

// serveWhileWaiting serves /healthz and /readyz on probeAddr and /metrics on metricsAddr ("0":
// not at all) until stop, which frees the addresses for the manager.
func serveWhileWaiting(probeAddr, metricsAddr string, status func() error) (stop func(), err error) {
	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprint(w, "ok") })
	probes.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "waiting for the hub and the member cluster's API server: %v\n", status())
	})
	metricsMux := http.NewServeMux()
	metricsMux.Handle("/metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
	var servers []*http.Server
	stop = func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	for _, s := range []struct {
		addr    string
		handler http.Handler
	}{{probeAddr, probes}, {metricsAddr, metricsMux}} {
		if s.addr == "" || s.addr == "0" {
			continue
		}
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			stop()
			return nil, fmt.Errorf("listen on %s: %w", s.addr, err)
		}
		srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				ctrl.Log.Error(err, "Probe server while waiting for the hub stopped", "address", s.addr)
			}
		}()
	}
	return stop, nil
}
