package hub

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/clusterhealth"
	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
	"github.com/dbfleet/dbfleet/test/framework"
)

var env *framework.Environment

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping hub integration tests in -short mode")
		os.Exit(0)
	}
	// The hub's logs help when a test fails; DBFLEET_TEST_LOGS=1 shows them.
	if os.Getenv("DBFLEET_TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	}
	var err error
	env, err = framework.StartHub()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// startHub runs the hub's controllers in-process against the test API server until the test
// ends, or until the returned stop function is called (to simulate a hub restart).
func startHub(t *testing.T) (stop func()) {
	t.Helper()
	return startHubAs(t, env.Config, ctrl.Options{})
}

// ctrlManager is the manager controllers are set up with.
type ctrlManager = ctrl.Manager

// startHubWith runs only the given controllers in-process against the test API server.
func startHubWith(t *testing.T, setup func(context.Context, ctrl.Manager) error) (stop func()) {
	t.Helper()
	return startManager(t, env.Config, ctrl.Options{}, setup)
}

// startHubAs runs the hub with the given identity and manager options (leader election, say).
func startHubAs(t *testing.T, cfg *rest.Config, opts ctrl.Options) (stop func()) {
	t.Helper()
	hubCfg := hubConfig()
	return startManager(t, cfg, opts, func(ctx context.Context, mgr ctrl.Manager) error {
		return databasecluster.Setup(ctx, mgr, hubCfg)
	})
}

var (
	observerMu sync.Mutex
	// observer is the liveness observer of the hub started last: the tests play the part of the
	// clusterhealth controller's Lease watch and feed it (see loseCluster).
	observer *liveness.Observer
)

// hubConfig is the configuration of a new hub: the production liveness observer, new with each
// hub as in `hub run`, confirming silences with a read of the agent's Lease from the API server
// (clusterhealth.ReadRenewTime) as the clusterhealth controller sets it up.
func hubConfig() hub.Config {
	obs := liveness.NewObserver(clock.RealClock{})
	obs.SetReader(clusterhealth.ReadRenewTime(env.Client))
	observerMu.Lock()
	defer observerMu.Unlock()
	observer = obs
	return hub.Config{Liveness: obs}
}

// observeRenewal tells the running hub's observer about an agent's Lease renewal, as the
// clusterhealth controller's Lease watch does when it delivers one.
func observeRenewal(cluster string, renewTime time.Time) {
	observerMu.Lock()
	obs := observer
	observerMu.Unlock()
	if obs != nil {
		obs.Observe(cluster, renewTime)
	}
}

func startManager(t *testing.T, cfg *rest.Config, opts ctrl.Options, setup func(context.Context, ctrl.Manager) error) (stop func()) {
	t.Helper()
	opts.Scheme = framework.Scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	// Each test runs its own manager; controller names repeat across them.
	opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(context.Background(), mgr); err != nil {
		t.Fatal(err)
	}
	return framework.Run(t, "hub manager", mgr.Start)
}
