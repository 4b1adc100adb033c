package agent

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/single"

	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/agent/member"
	"github.com/dbfleet/dbfleet/pkg/options"
	"github.com/dbfleet/dbfleet/test/framework"
)

var hub, east *framework.Environment

const clusterName = "east"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipping agent integration tests in -short mode")
		os.Exit(0)
	}
	if os.Getenv("DBFLEET_TEST_LOGS") != "" {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	}
	var err error
	if hub, err = framework.StartHub(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if east, err = framework.StartMember(clusterName); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = hub.Stop()
		os.Exit(1)
	}
	code := m.Run()
	for _, e := range []*framework.Environment{east, hub} {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// startAgent runs the member reconciler as the agent does: the hub is the manager's local
// cluster and the member is engaged through the single-cluster provider.
func startAgent(t *testing.T, hubCfg, memberCfg *rest.Config) (stop func()) {
	t.Helper()
	return startAgentWithGuard(t, hubCfg, memberCfg, nil)
}

// startAgentWithGuard also fences on the given guard (nil: never fences).
func startAgentWithGuard(t *testing.T, hubCfg, memberCfg *rest.Config, guard *fence.Guard) (stop func()) {
	t.Helper()
	return startAgentWithImage(t, hubCfg, memberCfg, guard, "")
}

// startAgentWithImage also runs postgres pods with the instance manager of the given image, as
// --instance-image does.
func startAgentWithImage(t *testing.T, hubCfg, memberCfg *rest.Config, guard *fence.Guard, instanceImage string) (stop func()) {
	t.Helper()
	memberCluster, err := cluster.New(memberCfg, func(o *cluster.Options) { o.Scheme = framework.Scheme }, member.MemberCache)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := mcmanager.New(hubCfg, single.New(clusterName, memberCluster), ctrl.Options{
		Scheme:                 framework.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mgr.GetLocalManager().Add(memberCluster); err != nil {
		t.Fatal(err)
	}
	// Each test starts its own agent; controller names repeat across them. It reconciles as many
	// shares at once as the agent does by default.
	opts := controller.TypedOptions[mcreconcile.Request]{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: options.AgentConcurrentReconciles}
	if err := member.Setup(mgr, guard, opts, member.Settings{InstanceImage: instanceImage, PrimaryLostAfter: member.DefaultPrimaryLostAfter}); err != nil {
		t.Fatal(err)
	}
	return framework.Run(t, "agent manager", mgr.Start)
}
