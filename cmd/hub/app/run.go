package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/clusterhealth"
	"github.com/dbfleet/dbfleet/pkg/hub/credentials"
	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
	"github.com/dbfleet/dbfleet/pkg/options"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

// controllers are the hub's controllers by name, for --controllers.
var controllers = hub.Registry{
	databasecluster.Name: func(ctx context.Context, mgr mcmanager.Manager, cfg hub.Config) error {
		return databasecluster.Setup(ctx, mgr.GetLocalManager(), cfg)
	},
	push.Name: func(ctx context.Context, mgr mcmanager.Manager, cfg hub.Config) error {
		return push.Setup(ctx, mgr, cfg.PushProvider)
	},
	clusterhealth.Name: func(ctx context.Context, mgr mcmanager.Manager, cfg hub.Config) error {
		return clusterhealth.Setup(ctx, mgr.GetLocalManager(), cfg)
	},
	credentials.Name: func(ctx context.Context, mgr mcmanager.Manager, _ hub.Config) error {
		return credentials.Setup(ctx, mgr.GetLocalManager())
	},
}

// runOptions are the flags of "hub run".
type runOptions struct {
	manager *options.Manager

	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	gracefulShutdownTimeout time.Duration

	controllers []string
	hub         hub.Config
	// defaultToleration is --default-unreachable-toleration, copied into hub.Config once parsed.
	defaultToleration time.Duration
}

func newRunOptions() *runOptions {
	manager := options.NewManager()
	manager.KubeAPIQPS, manager.KubeAPIBurst = options.HubQPS, options.HubBurst
	manager.ConcurrentReconciles = options.HubConcurrentReconciles
	return &runOptions{
		manager:                 manager,
		leaderElect:             true,
		leaderElectionNamespace: hub.Namespace,
		leaderElectionID:        "dbfleet-hub",
		leaseDuration:           15 * time.Second,
		renewDeadline:           10 * time.Second,
		retryPeriod:             2 * time.Second,
		gracefulShutdownTimeout: 30 * time.Second,
		controllers:             []string{"*"},
		hub: hub.Config{ClusterGracePeriod: 20 * time.Second, HeartbeatStatusInterval: 5 * time.Minute, EvictionRate: 10, EvictionBurst: 100,
			UnhealthyClusterThreshold: databasecluster.DefaultUnhealthyClusterThreshold},
		defaultToleration: placement.DefaultTolerationSeconds * time.Second,
	}
}

func (o *runOptions) addFlags(fs *pflag.FlagSet) {
	o.manager.AddFlags(fs)
	fs.BoolVar(&o.leaderElect, "leader-elect", o.leaderElect,
		"Elect a leader so that only one hub replica reconciles at a time.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", o.leaderElectionNamespace,
		"Namespace of the leader election Lease on the hub.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", o.leaderElectionID,
		"Name of the leader election Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", o.leaseDuration,
		"How long a non-leader waits before it may take over an unrenewed leadership.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", o.renewDeadline,
		"How long the leader keeps trying to renew before it gives up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", o.retryPeriod,
		"How long candidates wait between tries to acquire or renew leadership.")
	fs.DurationVar(&o.gracefulShutdownTimeout, "graceful-shutdown-timeout", o.gracefulShutdownTimeout,
		"How long controllers get to finish in-flight work after SIGTERM.")
	fs.DurationVar(&o.hub.ClusterGracePeriod, "cluster-grace-period", o.hub.ClusterGracePeriod,
		"How long the hub waits without observing a member agent renew its lease before it marks the cluster Ready=Unknown and taints it dbfleet.io/unreachable. Measured on the hub's own clock.")
	fs.DurationVar(&o.hub.HeartbeatStatusInterval, "heartbeat-status-interval", o.hub.HeartbeatStatusInterval,
		"How stale MemberCluster status.lastHeartbeat may get before the hub rewrites it. Health is judged from every Lease renewal regardless; this only bounds status writes (one per cluster per interval at rest).")
	fs.DurationVar(&o.defaultToleration, "default-unreachable-toleration", o.defaultToleration,
		"How long a placement tolerates the hub's dbfleet.io/unreachable and dbfleet.io/not-ready NoExecute taints when its clusterTolerations say nothing of them; then the cluster's shares are evicted (whole seconds).")
	fs.Float64Var(&o.hub.EvictionRate, "eviction-rate", o.hub.EvictionRate,
		"Shares per second that may leave failed clusters (cluster and application failover), hub-wide; 0 for no limit. Protects the fleet when many clusters look lost at once.")
	fs.IntVar(&o.hub.EvictionBurst, "eviction-burst", o.hub.EvictionBurst,
		"How many shares may leave failed clusters at once before --eviction-rate applies.")
	fs.Float64Var(&o.hub.UnhealthyClusterThreshold, "unhealthy-cluster-threshold", o.hub.UnhealthyClusterThreshold,
		"Share of a database's clusters (0 < x <= 1) that, not Ready at once (and at least 3 of them, or every one of two or more), pauses its evictions for failure, the primary's included, until a grace period after enough are back: the fault is then likelier the hub's own (its API server, its network, every agent at once), and the database goes on meanwhile.")
	fs.StringSliceVar(&o.controllers, "controllers", o.controllers, fmt.Sprintf(
		"Controllers to run: '*' for all, 'name' to add one, '-name' to leave one out. Known: %s.",
		strings.Join(controllers.Names(), ", ")))
}

func (o *runOptions) validate() error {
	errs := []error{o.manager.Validate()}
	if o.leaderElect {
		if o.leaderElectionNamespace == "" || o.leaderElectionID == "" {
			errs = append(errs, errors.New("--leader-election-namespace and --leader-election-id must not be empty when --leader-elect is set"))
		}
		if o.retryPeriod <= 0 || o.renewDeadline <= o.retryPeriod || o.leaseDuration <= o.renewDeadline {
			errs = append(errs, fmt.Errorf("leader election needs 0 < --leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s)",
				o.retryPeriod, o.renewDeadline, o.leaseDuration))
		}
	}
	if o.hub.ClusterGracePeriod <= 0 {
		errs = append(errs, fmt.Errorf("--cluster-grace-period must be positive, got %s", o.hub.ClusterGracePeriod))
	}
	if o.hub.HeartbeatStatusInterval <= 0 {
		errs = append(errs, fmt.Errorf("--heartbeat-status-interval must be positive, got %s", o.hub.HeartbeatStatusInterval))
	}
	if o.defaultToleration < 0 || o.defaultToleration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--default-unreachable-toleration must be whole seconds, zero or more, got %s", o.defaultToleration))
	}
	if o.hub.EvictionRate < 0 {
		errs = append(errs, fmt.Errorf("--eviction-rate must not be negative, got %g", o.hub.EvictionRate))
	}
	if t := o.hub.UnhealthyClusterThreshold; !(t > 0 && t <= 1) {
		errs = append(errs, fmt.Errorf("--unhealthy-cluster-threshold must be above 0 and at most 1, got %v", t))
	}
	if o.hub.EvictionBurst < 1 {
		errs = append(errs, fmt.Errorf("--eviction-burst must be at least 1, got %d", o.hub.EvictionBurst))
	}
	if o.gracefulShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--graceful-shutdown-timeout must not be negative, got %s", o.gracefulShutdownTimeout))
	}
	if _, err := controllers.Enabled(o.controllers); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func newRunCommand() *cobra.Command {
	o := newRunOptions()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the hub controller manager",
		Long: `Run the hub controller manager against the hub API server: it binds each DatabaseCluster
to the winning (Cluster)PropagationPolicy, places its replicas across the MemberClusters, writes
one MemberDatabase per chosen cluster into member-<cluster>, and aggregates what the agents report
into the DatabaseCluster's status and conditions.`,
		Args: cobra.NoArgs,
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

// agentLeases selects the agents' heartbeat Leases, which carry the cluster label.
var agentLeases = func() labels.Selector {
	req, err := labels.NewRequirement(dbfleetv1alpha1.LabelCluster, selection.Exists, nil)
	utilruntime.Must(err)
	return labels.NewSelector().Add(*req)
}()

// controllerOptions are what every hub controller runs with (the push controller takes them
// through member.Setup): --concurrent-reconciles, and a deadline on each reconcile.
func (o *runOptions) controllerOptions() config.Controller {
	return config.Controller{MaxConcurrentReconciles: o.manager.ConcurrentReconciles, ReconciliationTimeout: options.ReconcileTimeout}
}

func run(ctx context.Context, o *runOptions) error {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.manager.Zap)))
	log := ctrl.Log.WithName("hub")

	cfg, err := o.manager.RESTConfig()
	if err != nil {
		return err
	}
	if o.leaderElect {
		c, err := client.New(directConfig(cfg), client.Options{Scheme: scheme.New()})
		if err != nil {
			return fmt.Errorf("hub client: %w", err)
		}
		if err := ensureNamespace(ctrl.LoggerInto(ctx, log), c, o.leaderElectionNamespace); err != nil {
			return err
		}
	}
	// The local cluster is the hub; the provider engages Push-mode members.
	provider := push.NewProvider()
	mgr, err := mcmanager.New(cfg, provider, ctrl.Options{
		Scheme: scheme.New(),
		// The only Secrets the hub caches are the Push kubeconfigs in its own namespace; the
		// credentials controller reads database Secrets directly.
		Cache: cache.Options{
			// The hub never reads managedFields: not caching them saves memory at 10,000 databases.
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}: {Namespaces: map[string]cache.Config{hub.Namespace: {}}},
				// Agents' heartbeat Leases, not every Lease of the hub.
				&coordinationv1.Lease{}: {Label: agentLeases},
			}},
		Metrics:                       metricsserver.Options{BindAddress: o.manager.MetricsBindAddress},
		HealthProbeBindAddress:        o.manager.HealthProbeBindAddress,
		PprofBindAddress:              o.manager.PprofBindAddress,
		Controller:                    o.controllerOptions(),
		LeaderElection:                o.leaderElect,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		GracefulShutdownTimeout:       &o.gracefulShutdownTimeout,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	local := mgr.GetLocalManager()
	if err := local.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := local.AddReadyzCheck("informers", func(req *http.Request) error {
		if !local.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("informer caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	enabled, _ := controllers.Enabled(o.controllers) // validated above
	o.hub.DefaultUnreachableToleration = &o.defaultToleration
	o.hub.PushProvider = provider
	o.hub.Liveness = liveness.NewObserver(clock.RealClock{})
	if err := controllers.Setup(ctx, mgr, o.hub, enabled); err != nil {
		return err
	}
	log.Info("Starting hub", "controllers", enabled, "leaderElection", o.leaderElect)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("hub stopped: %w", err)
	}
	log.Info("Hub stopped")
	return nil
}
