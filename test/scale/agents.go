package scale

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/single"

	dbfleetagent "github.com/dbfleet/dbfleet/pkg/agent"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/options"
	simmember "github.com/dbfleet/dbfleet/test/scale/member"
)

// agent is one simulated member: the agent's own reconciler, heartbeat and fence guard wired as
// cmd/agent wires them, with the hub credentials `hub join` minted for this cluster, against a
// simulated member API server.
type agent struct {
	name   string
	member *simmember.Cluster
	guard  *fence.Guard
	// cut, when set, fails every new request to the hub: a network partition of this cluster.
	cut    atomic.Bool
	cancel context.CancelFunc
	done   chan error
}

// agentSettings are shared by every agent of a run.
type agentSettings struct {
	scheme            *runtime.Scheme
	mapper            meta.RESTMapper
	heartbeatInterval time.Duration
	fenceAfter        time.Duration
	readyAfter        time.Duration
}

// partitionError is what a cut agent's hub requests fail with.
var partitionError = errors.New("simulated network partition")

type cutTransport struct {
	rt  http.RoundTripper
	cut *atomic.Bool
}

func (t *cutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.cut.Load() {
		return nil, partitionError
	}
	return t.rt.RoundTrip(req)
}

// startAgent starts an agent for cluster name with the hub kubeconfig join returned.
func startAgent(parent context.Context, s *agentSettings, name string, hubKubeconfig []byte) (*agent, error) {
	a := &agent{name: name, done: make(chan error, 1)}
	hubCfg, err := clientcmd.RESTConfigFromKubeConfig(hubKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("hub kubeconfig of %s: %w", name, err)
	}
	// As cmd/agent configures its hub client.
	hubCfg.QPS, hubCfg.Burst = options.AgentQPS, options.AgentBurst
	// Its own connection to the hub, as an agent in its own cluster has (its manager and its
	// client share it, below). client-go shares one transport among configs that differ only in
	// their bearer token, so without a dialer of its own every agent of the harness multiplexed
	// its renewals and watches over the same few HTTP/2 connections, and a stall of one could
	// silence hundreds of agents at once.
	hubCfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	hubCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &cutTransport{rt: rt, cut: &a.cut} })
	a.member = simmember.New(s.scheme, s.mapper, s.readyAfter)

	mgr, err := mcmanager.New(hubCfg, single.New(name, a.member), ctrl.Options{
		Scheme:                 s.scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// One mapper for every agent: discovery answers are the same for all, and 1,000 copies
		// would only cost the harness memory and the hub requests.
		MapperProvider: func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return s.mapper, nil },
		Cache:          dbfleetagent.HubCache(name),
		// Every agent's controller is named memberdatabase; here they share one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     ctrl.Log.WithName("agent").WithValues("cluster", name),
	})
	if err != nil {
		return nil, fmt.Errorf("agent manager of %s: %w", name, err)
	}
	local := mgr.GetLocalManager()
	if err := local.Add(a.member); err != nil {
		return nil, err
	}
	hubClient, err := client.New(hubCfg, client.Options{HTTPClient: local.GetHTTPClient(), Scheme: s.scheme, Mapper: s.mapper})
	if err != nil {
		return nil, err
	}
	a.guard, err = dbfleetagent.Setup(mgr, dbfleetagent.Settings{
		Cluster: name, HeartbeatInterval: s.heartbeatInterval, FenceAfter: s.fenceAfter, Version: "bench",
		Hub: hubClient, Member: a.member.GetClient(), MemberDiscovery: a.member,
		Controller: controller.TypedOptions[mcreconcile.Request]{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(parent)
	a.cancel = cancel
	go func() { a.done <- mgr.Start(ctx) }()
	return a, nil
}

// stop stops the agent and waits for it.
func (a *agent) stop() error {
	a.cancel()
	return <-a.done
}

// fleet is the running agents, by cluster name.
type fleet struct {
	mu     sync.Mutex
	agents map[string]*agent
}

func (f *fleet) add(a *agent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.agents == nil {
		f.agents = map[string]*agent{}
	}
	f.agents[a.name] = a
}

func (f *fleet) get(name string) *agent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.agents[name]
}

func (f *fleet) all() []*agent {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*agent, 0, len(f.agents))
	for _, a := range f.agents {
		out = append(out, a)
	}
	return out
}

// stopAll stops every agent, in parallel.
func (f *fleet) stopAll() {
	var wg sync.WaitGroup
	for _, a := range f.all() {
		wg.Go(func() { _ = a.stop() })
	}
	wg.Wait()
}
