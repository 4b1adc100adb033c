package app

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/pkg/options"
)

// hubAccess are the flags that reach the hub as an admin.
type hubAccess struct {
	kubeconfig string
	context    string
}

func (h *hubAccess) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&h.kubeconfig, "kubeconfig", "", "hub admin kubeconfig (default $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&h.context, "context", "", "context of the kubeconfig to use (default its current context)")
}

// directConfig is cfg for a client that never watches, with a timeout on each request: a
// command must not hang on a hub connection that died.
func directConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = options.RequestTimeout
	return cfg
}

func (h *hubAccess) client() (client.Client, *rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = h.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: h.context}).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("load the hub admin kubeconfig: %w", err)
	}
	c, err := client.New(directConfig(cfg), client.Options{Scheme: join.Scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("client for the hub: %w", err)
	}
	return c, cfg, nil
}

// joinOptions are the flags of "hub join".
type joinOptions struct {
	hub             hubAccess
	opts            join.Options
	syncMode        string
	labels          []string
	output          string
	outputFormat    string
	hubCAFile       string
	memberConfig    string
	memberContext   string
	pullOnlyChanged []string // Pull-only flags given explicitly, filled in before validate
}

// What --output-format prints: the agent's manifests, or the dbfleet-agent chart's values.
const (
	outputManifests  = "manifests"
	outputHelmValues = "helm-values"
)

// pullOnlyFlags configure the agent and its credential; Push mode has neither.
var pullOnlyFlags = []string{"output", "output-format", "hub-server", "hub-ca-file", "agent-image", "heartbeat-interval", "fence-after", "token-expiration"}

func newJoinOptions() *joinOptions {
	return &joinOptions{opts: join.NewOptions(""), syncMode: string(dbfleetv1alpha1.SyncPull), outputFormat: outputManifests}
}

func (o *joinOptions) addFlags(fs *pflag.FlagSet) {
	o.hub.addFlags(fs)
	fs.StringVar(&o.opts.Region, "region", "", "region of the cluster (required)")
	fs.StringVar(&o.opts.Zone, "zone", "", "zone of the cluster (required)")
	fs.StringVar(&o.opts.Provider, "provider", "", "provider of the cluster, e.g. aws, gcp, on-prem")
	fs.StringArrayVar(&o.labels, "label", nil, "label k=v for the MemberCluster, for policies' cluster affinity (repeatable)")
	fs.StringVar(&o.syncMode, "sync-mode", o.syncMode, "Pull (an agent in the member) or Push (the hub reconciles the member through --member-kubeconfig)")
	fs.StringVarP(&o.output, "output", "o", "", "write the agent manifests (or values) to this file (mode 0600) instead of stdout")
	fs.StringVar(&o.outputFormat, "output-format", o.outputFormat, "what to print for the member: manifests (kubectl apply -f) or helm-values (a values file of the dbfleet-agent chart)")
	fs.StringVar(&o.opts.HubServer, "hub-server", "", "hub API server URL the agent connects to (default the admin kubeconfig's server)")
	fs.StringVar(&o.hubCAFile, "hub-ca-file", "", "PEM CA bundle the agent verifies the hub with (default the admin kubeconfig's CA)")
	fs.StringVar(&o.opts.AgentImage, "agent-image", o.opts.AgentImage, "container image of the agent")
	fs.DurationVar(&o.opts.HeartbeatInterval, "heartbeat-interval", o.opts.HeartbeatInterval, "how often the agent renews its hub Lease")
	fs.DurationVar(&o.opts.FenceAfter, "fence-after", o.opts.FenceAfter, "how long the agent keeps its primaries without a hub renewal; longer than --heartbeat-interval")
	fs.DurationVar(&o.opts.TokenExpiration, "token-expiration", o.opts.TokenExpiration, "lifetime of the agent's hub token (at least 10m; the API server may cap it); join again to rotate")
	fs.StringVar(&o.memberConfig, "member-kubeconfig", "", "Push mode: kubeconfig that reaches the member cluster (required with --sync-mode Push)")
	fs.StringVar(&o.memberContext, "member-context", "", "Push mode: context of --member-kubeconfig to use (default its current context)")
	fs.BoolVar(&o.opts.AllowBroadKubeconfig, "allow-broad-kubeconfig", false, "Push mode: join even if --member-kubeconfig may do more than the hub needs in the member (cluster-admin, say), or join cannot ask; with a warning")
}

// complete turns flag values into join.Options, reading files, and validates everything.
func (o *joinOptions) complete(name string) ([]string, error) {
	var errs []error
	var warnings []string
	o.opts.Name = name
	o.opts.SyncMode = dbfleetv1alpha1.SyncMode(o.syncMode)
	labels, err := join.ParseLabels(o.labels)
	if err != nil {
		errs = append(errs, err)
	}
	o.opts.Labels = labels
	if o.opts.SyncMode == dbfleetv1alpha1.SyncPush && len(o.pullOnlyChanged) > 0 {
		errs = append(errs, fmt.Errorf("--%s configure the agent, which Push mode does not have", strings.Join(o.pullOnlyChanged, ", --")))
	}
	if o.outputFormat != outputManifests && o.outputFormat != outputHelmValues {
		errs = append(errs, fmt.Errorf("--output-format %q: use %s or %s", o.outputFormat, outputManifests, outputHelmValues))
	}
	if o.memberContext != "" && o.memberConfig == "" {
		errs = append(errs, errors.New("--member-context needs --member-kubeconfig"))
	}
	if o.memberConfig != "" && o.opts.SyncMode != dbfleetv1alpha1.SyncPush {
		errs = append(errs, errors.New("--member-kubeconfig is for --sync-mode Push; in Pull mode the agent runs in the member"))
	} else if o.memberConfig != "" {
		data, w, err := join.LoadMemberKubeconfig(o.memberConfig, o.memberContext)
		if err != nil {
			errs = append(errs, err)
		}
		o.opts.MemberKubeconfig, warnings = data, w
	}
	if o.hubCAFile != "" {
		data, err := os.ReadFile(o.hubCAFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--hub-ca-file: %w", err))
		}
		o.opts.HubCA = data
	}
	if err := o.opts.Validate(); err != nil {
		errs = append(errs, err)
	}
	return warnings, errors.Join(errs...)
}

func newJoinCommand() *cobra.Command {
	o := newJoinOptions()
	cmd := &cobra.Command{
		Use:   "join NAME --region R --zone Z [flags]",
		Short: "Join a member cluster to the hub and print its agent's manifests",
		Long: `Join creates (or updates) the MemberCluster NAME on the hub and the namespace member-NAME that
holds its MemberDatabases and heartbeat Lease.

In Pull mode (the default) it also creates a ServiceAccount dbfleet-agent in member-NAME whose RBAC
reaches only that namespace's MemberDatabases (read; status; the agent's finalizer), the Lease
dbfleet-agent there, and the MemberCluster NAME (read; status), mints a token for it with the
TokenRequest API, and prints the manifests that install the agent in the member cluster: namespace
dbfleet-system, a Secret holding a kubeconfig for the hub, the agent's RBAC and its Deployment.
Apply them to the member cluster, or print the same as values of the dbfleet-agent Helm chart
with --output-format helm-values. Joining again rotates the credential: the ServiceAccount is
recreated, so tokens from earlier joins stop working.

In Push mode the hub reconciles the member through --member-kubeconfig, which join stores in the
hub Secret dbfleet-system/NAME; no agent and no agent credential are created.

Run it with a hub admin kubeconfig (--kubeconfig, else $KUBECONFIG). Manifests go to stdout (or
-o FILE); what join did goes to stderr (stdout with -o).`,
		Example: `  hub join east --region us-east-1 --zone us-east-1a --provider aws --label tier=gold \
      --hub-server https://hub.example.com:6443 | kubectl --context east apply -f -
  hub join west --region us-west-2 --zone us-west-2b -o west-agent.yaml
  hub join north --region eu-north-1 --zone eu-north-1a --output-format helm-values -o north-values.yaml
  hub join lab --region on-prem --zone rack-3 --sync-mode Push --member-kubeconfig lab.kubeconfig`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range pullOnlyFlags {
				if cmd.Flags().Changed(f) {
					o.pullOnlyChanged = append(o.pullOnlyChanged, f)
				}
			}
			warnings, err := o.complete(args[0])
			if err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			c, cfg, err := o.hub.client()
			if err != nil {
				return err
			}
			ep, err := join.HubEndpointFromConfig(cfg)
			if err != nil {
				return err
			}
			res, err := join.Join(cmd.Context(), c, ep, o.opts)
			if err != nil {
				return err
			}
			res.Warnings = append(warnings, res.Warnings...)
			report := cmd.ErrOrStderr()
			if o.output != "" {
				report = cmd.OutOrStdout()
			}
			out, what := res.Manifests, "the manifests above"
			if o.outputFormat == outputHelmValues {
				out, what = res.HelmValues, "the values above"
			}
			if out != nil {
				if o.output == "" {
					if _, err := cmd.OutOrStdout().Write(out); err != nil {
						return err
					}
				} else if err := os.WriteFile(o.output, out, 0o600); err != nil {
					return fmt.Errorf("write -o: %w", err)
				}
			}
			fmt.Fprint(report, res.Summary())
			if out != nil {
				where := what
				if o.output != "" {
					where = o.output
				}
				if o.outputFormat == outputHelmValues {
					fmt.Fprintf(report, "next: install the dbfleet-agent chart into cluster %s with %s (helm --kube-context %s install dbfleet-agent deploy/charts/dbfleet-agent -f ...); they hold its hub credential, keep them secret\n",
						o.opts.Name, where, o.opts.Name)
				} else {
					fmt.Fprintf(report, "next: apply %s to cluster %s (kubectl --context %s apply -f ...); they hold its hub credential, keep them secret\n",
						where, o.opts.Name, o.opts.Name)
				}
			}
			return nil
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}

func newUnjoinCommand() *cobra.Command {
	var (
		hub   hubAccess
		force bool
	)
	cmd := &cobra.Command{
		Use:   "unjoin NAME",
		Short: "Remove a member cluster from the hub and revoke its agent's credential",
		Long: `Unjoin deletes the agent's ServiceAccount on the hub (its tokens stop working at once), the
ClusterRole and ClusterRoleBinding dbfleet-agent-NAME if an earlier version created them, the MemberCluster NAME, the namespace
member-NAME, and in Push mode the hub Secret holding the member's kubeconfig. It does not touch the
member cluster: delete the agent there with kubectl delete namespace dbfleet-system and
kubectl delete clusterrole,clusterrolebinding dbfleet-agent.

It refuses while MemberDatabases exist in member-NAME, naming their DatabaseClusters: move them
away first (taint the MemberCluster, or change their policies). --force deletes them without
waiting for the agent, leaving whatever the member still runs behind.

Running it again, or for a cluster that is not joined, succeeds and changes nothing.`,
		Example: `  hub unjoin east
  hub unjoin lab --force`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := join.ValidateName(args[0]); err != nil {
				return err
			}
			c, _, err := hub.client()
			if err != nil {
				return err
			}
			res, err := join.Unjoin(cmd.Context(), c, args[0], force)
			if res != nil {
				fmt.Fprint(cmd.OutOrStdout(), res.Summary(args[0]))
			}
			return err
		},
	}
	hub.addFlags(cmd.Flags())
	cmd.Flags().BoolVar(&force, "force", false, "unjoin even while the cluster holds MemberDatabases, leaving whatever the member runs behind")
	return cmd
}
