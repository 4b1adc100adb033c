package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/providers/single"

	"github.com/dbfleet/dbfleet/pkg/agent"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/agent/heartbeat"
	"github.com/dbfleet/dbfleet/pkg/agent/hubtoken"
	"github.com/dbfleet/dbfleet/pkg/agent/member"
	"github.com/dbfleet/dbfleet/pkg/options"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

// version is set at build time with -ldflags "-X .../cmd/agent/app.version=...".
var version = "dev"

// agentOptions are the agent's flags.
type agentOptions struct {
	manager *options.Manager

	hubKubeconfig string
	// hubKubeconfigSecret is namespace/name of the member Secret the kubeconfig is mounted from,
	// where a renewed hub token is saved (empty: nowhere).
	hubKubeconfigSecret string
	clusterName         string
	heartbeatInterval   time.Duration
	fenceAfter          time.Duration
	instanceImage       string
	primaryLostAfter    time.Duration
	clockOffset         time.Duration
	// memberQPS and memberBurst bound the requests to the member API server; the manager's
	// --kube-api-qps and --kube-api-burst, those to the hub.
	memberQPS   float32
	memberBurst int
}

func newAgentOptions() *agentOptions {
	manager := options.NewManager()
	manager.KubeAPIQPS, manager.KubeAPIBurst = options.AgentQPS, options.AgentBurst
	manager.ConcurrentReconciles = options.AgentConcurrentReconciles
	return &agentOptions{
		manager:           manager,
		heartbeatInterval: 5 * time.Second,
		fenceAfter:        15 * time.Second,
		primaryLostAfter:  member.DefaultPrimaryLostAfter,
		memberQPS:         options.AgentMemberQPS,
		memberBurst:       options.AgentMemberBurst,
	}
}

func (o *agentOptions) addFlags(fs *pflag.FlagSet) {
	o.manager.AddFlags(fs)
	fs.StringVar(&o.hubKubeconfig, "hub-kubeconfig", o.hubKubeconfig,
		"Path to the kubeconfig that reaches the hub with this cluster's join credentials (required).")
	fs.StringVar(&o.hubKubeconfigSecret, "hub-kubeconfig-secret", o.hubKubeconfigSecret,
		"NAMESPACE/NAME of the member Secret (key \"kubeconfig\") that --hub-kubeconfig is mounted from: the agent renews its hub token half-way through its life and saves the new one there, so a restarted agent starts with it. Empty: renewed tokens are kept in memory only.")
	fs.StringVar(&o.clusterName, "cluster-name", o.clusterName,
		"Name of this cluster's MemberCluster on the hub (required).")
	fs.DurationVar(&o.heartbeatInterval, "heartbeat-interval", o.heartbeatInterval,
		"How often the agent renews its Lease on the hub.")
	fs.DurationVar(&o.fenceAfter, "fence-after", o.fenceAfter,
		"How long the agent keeps its primaries without a successful hub renewal before it fences them.")
	fs.DurationVar(&o.primaryLostAfter, "primary-lost-after", o.primaryLostAfter,
		"How long a primary's instance may stop serving (its /status unread, or postgres not running as primary), while this agent is healthy, before the agent counts the pod lost: it renews the primary's Lease no more, fences the share once the Lease has run out, and the hub promotes the most advanced eligible standby. A primary whose postgres restarts 3 times within 3 times this long counts as lost too. 0 turns it off.")
	fs.DurationVar(&o.clockOffset, "clock-offset", 0,
		"Testing only: run the agent's clock this far off the system's (e.g. 1h), for tests of how a wrong agent clock is handled: its Lease renewals carry the shifted time, and its instances fence rather than trust them.")
	fs.Float32Var(&o.memberQPS, "member-kube-api-qps", o.memberQPS,
		"Queries per second the agent may send to its member cluster's API server (client-side limit; --kube-api-qps is the hub's). Each live primary's Lease is rewritten once a heartbeat.")
	fs.IntVar(&o.memberBurst, "member-kube-api-burst", o.memberBurst,
		"Requests the agent may send to its member cluster's API server in a burst above --member-kube-api-qps.")
	fs.StringVar(&o.instanceImage, "instance-image", o.instanceImage,
		"Image carrying /dbfleet-instance (normally the agent's own). When set, postgres pods run the instance manager as PID 1 (copied in by an init container) and the client Services follow the role it reports; empty runs the engine image as it is.")
}

func (o *agentOptions) validate() error {
	errs := []error{o.manager.Validate()}
	if o.hubKubeconfig == "" {
		errs = append(errs, errors.New("--hub-kubeconfig is required"))
	}
	if o.hubKubeconfigSecret != "" {
		if ns, name, ok := strings.Cut(o.hubKubeconfigSecret, "/"); !ok || ns == "" || name == "" {
			errs = append(errs, fmt.Errorf("--hub-kubeconfig-secret must be NAMESPACE/NAME, got %q", o.hubKubeconfigSecret))
		}
	}
	if o.clusterName == "" {
		errs = append(errs, errors.New("--cluster-name is required"))
	} else if msgs := validation.IsDNS1123Label(o.clusterName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--cluster-name %q: %v", o.clusterName, msgs))
	}
	errs = append(errs, fence.ValidateTimings(o.heartbeatInterval, o.fenceAfter)...)
	if o.memberQPS <= 0 || o.memberBurst <= 0 {
		errs = append(errs, fmt.Errorf("--member-kube-api-qps (%v) and --member-kube-api-burst (%d) must be positive", o.memberQPS, o.memberBurst))
	}
	if o.primaryLostAfter < 0 || (o.primaryLostAfter > 0 && o.primaryLostAfter < 2*time.Second) {
		errs = append(errs, fmt.Errorf("--primary-lost-after must be 0 (off) or at least 2s, got %s", o.primaryLostAfter))
	}
	if o.clockOffset.Abs() > 24*time.Hour {
		errs = append(errs, fmt.Errorf("--clock-offset must be within ±24h, got %s", o.clockOffset))
	}
	return errors.Join(errs...)
}

// NewAgentCommand returns the agent's command.
func NewAgentCommand() *cobra.Command {
	o := newAgentOptions()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "The dbfleet member agent",
		Long: `The dbfleet agent runs in a member cluster: it turns the cluster's MemberDatabases on the
hub into local StatefulSets, reports their status, renews the cluster's heartbeat Lease and
fences its primaries when it loses the hub.

It runs in the member cluster (in-cluster config) or as a local process (--kubeconfig for the
member); --hub-kubeconfig holds the credentials "hub join" minted, which reach only this
cluster's objects on the hub. When it has not renewed its hub lease for --fence-after, it fences
its primaries (pods relabelled dbfleet.io/role=fenced, member-local Lease dbfleet-primary-<db> no
longer renewed) until the hub hands them a higher epoch.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return run(ctrl.SetupSignalHandler(), o)
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

// memberRESTConfig is the member cluster's config (--kubeconfig), with the member's request
// limit rather than the hub's.
func (o *agentOptions) memberRESTConfig() (*rest.Config, error) {
	cfg, err := o.manager.RESTConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.memberQPS, o.memberBurst
	return cfg, nil
}

// managerOptions are the agent manager's options from its flags.
func (o *agentOptions) managerOptions(s *runtime.Scheme) ctrl.Options {
	return ctrl.Options{
		Scheme:                 s,
		Metrics:                metricsserver.Options{BindAddress: o.manager.MetricsBindAddress},
		HealthProbeBindAddress: o.manager.HealthProbeBindAddress,
		PprofBindAddress:       o.manager.PprofBindAddress,
		Controller: config.Controller{MaxConcurrentReconciles: o.manager.ConcurrentReconciles,
			ReconciliationTimeout: passTimeout(o.fenceAfter)},
		Cache: agent.HubCache(o.clusterName),
	}
}

// passTimeout bounds each reconcile of the agent's controllers. A pass that waits on a hub it
// cannot reach (a partition drops its packets: nothing refuses them) holds its share, and no
// other pass of that share judges its fence before it gives up; with the minute a hub controller
// gets, the agent fenced a partitioned primary 30 s late in the end-to-end suite. A third of
// fenceAfter (5 s by default), and never under 3 s, which a healthy pass on a busy machine needs
// well under.
func passTimeout(fenceAfter time.Duration) time.Duration {
	return min(max(fenceAfter/3, 3*time.Second), options.ReconcileTimeout)
}

// run wires the agent: a multicluster manager whose local cluster is the hub (its cache limited
// to member-<cluster>, all the join credentials can read) and whose single provider engages the
// member cluster; the member reconciler; and the heartbeat.
func run(ctx context.Context, o *agentOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.manager.Zap)))
	log := ctrl.Log.WithName("agent").WithValues("cluster", o.clusterName)
	runtimeScheme := scheme.New()

	hubCfg, err := clientcmd.BuildConfigFromFlags("", o.hubKubeconfig)
	if err != nil {
		return fmt.Errorf("load --hub-kubeconfig %s: %w", o.hubKubeconfig, err)
	}
	// --kube-api-qps and --kube-api-burst bound the agent's requests to both API servers.
	hubCfg.QPS, hubCfg.Burst = o.manager.KubeAPIQPS, o.manager.KubeAPIBurst
	// Every hub client takes the token in use at each request, which the renewer replaces.
	hubToken := &hubtoken.Source{}
	renewing := false
	if cfg := hubToken.Config(hubCfg); cfg != nil {
		hubCfg, renewing = cfg, true
	}
	memberCfg, err := o.memberRESTConfig()
	if err != nil {
		return err
	}
	if err := waitForHub(ctrl.LoggerInto(ctx, log), hubCfg, memberCfg, o.manager.HealthProbeBindAddress, o.manager.MetricsBindAddress); err != nil {
		if ctx.Err() != nil {
			log.Info("Stopped before the hub could be reached")
			return nil
		}
		return err
	}
	memberCluster, err := cluster.New(memberCfg, func(co *cluster.Options) { co.Scheme = runtimeScheme }, member.MemberCache)
	if err != nil {
		return fmt.Errorf("member cluster: %w", err)
	}
	mgr, err := mcmanager.New(hubCfg, single.New(o.clusterName, memberCluster), o.managerOptions(runtimeScheme))
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	local := mgr.GetLocalManager()
	if err := local.Add(memberCluster); err != nil {
		return err
	}
	// The heartbeat's client: it never watches, and bounds each renewal and report itself.
	hubClient, err := client.New(hubCfg, client.Options{Scheme: runtimeScheme})
	if err != nil {
		return err
	}
	disco, err := heartbeat.NewMemberDiscovery(memberCfg, o.heartbeatInterval)
	if err != nil {
		return err
	}
	if _, err := agent.Setup(mgr, agent.Settings{
		Cluster: o.clusterName, HeartbeatInterval: o.heartbeatInterval, FenceAfter: o.fenceAfter, Version: version,
		InstanceImage: o.instanceImage, PrimaryLostAfter: o.primaryLostAfter, ClockOffset: o.clockOffset,
		Hub: hubClient, Member: memberCluster.GetClient(), MemberDiscovery: disco,
	}); err != nil {
		return err
	}
	if renewing {
		renewer, err := o.hubTokenRenewer(hubToken, hubCfg, memberCfg, runtimeScheme, log)
		if err != nil {
			return err
		}
		if err := local.Add(renewer); err != nil {
			return err
		}
	}
	if err := local.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := local.AddReadyzCheck("caches", func(req *http.Request) error {
		if !local.GetCache().WaitForCacheSync(req.Context()) || !memberCluster.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	log.Info("Starting agent", "heartbeatInterval", o.heartbeatInterval, "fenceAfter", o.fenceAfter)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("agent stopped: %w", err)
	}
	return nil
}

// hubTokenRenewer renews the hub token and saves it into --hub-kubeconfig-secret.
func (o *agentOptions) hubTokenRenewer(source *hubtoken.Source, hubCfg, memberCfg *rest.Config, s *runtime.Scheme, log logr.Logger) (*hubtoken.Renewer, error) {
	hub, err := kubernetes.NewForConfig(hubCfg)
	if err != nil {
		return nil, err
	}
	r := &hubtoken.Renewer{Source: source, Hub: hub, Log: log.WithName("hub-token")}
	if o.hubKubeconfigSecret == "" {
		return r, nil
	}
	if r.Kubeconfig, err = os.ReadFile(o.hubKubeconfig); err != nil {
		return nil, fmt.Errorf("read --hub-kubeconfig: %w", err)
	}
	// Not the member cluster's cache: one Secret, read and written once a token lifetime.
	if r.Member, err = client.New(memberCfg, client.Options{Scheme: s}); err != nil {
		return nil, err
	}
	ns, name, _ := strings.Cut(o.hubKubeconfigSecret, "/")
	r.Secret, r.Key = types.NamespacedName{Namespace: ns, Name: name}, "kubeconfig"
	return r, nil
}
