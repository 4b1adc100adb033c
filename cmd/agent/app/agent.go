package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dbfleet/dbfleet/pkg/options"
)

// agentOptions are the agent's flags.
type agentOptions struct {
	manager *options.Manager

	hubKubeconfig     string
	clusterName       string
	heartbeatInterval time.Duration
	fenceAfter        time.Duration
}

func newAgentOptions() *agentOptions {
	return &agentOptions{
		manager:           options.NewManager(),
		heartbeatInterval: 5 * time.Second,
		fenceAfter:        15 * time.Second,
	}
}

func (o *agentOptions) addFlags(fs *pflag.FlagSet) {
	o.manager.AddFlags(fs)
	fs.StringVar(&o.hubKubeconfig, "hub-kubeconfig", o.hubKubeconfig,
		"Path to the kubeconfig that reaches the hub with this cluster's join credentials (required).")
	fs.StringVar(&o.clusterName, "cluster-name", o.clusterName,
		"Name of this cluster's MemberCluster on the hub (required).")
	fs.DurationVar(&o.heartbeatInterval, "heartbeat-interval", o.heartbeatInterval,
		"How often the agent renews its Lease on the hub.")
	fs.DurationVar(&o.fenceAfter, "fence-after", o.fenceAfter,
		"How long the agent keeps its primaries without a successful hub renewal before it fences them.")
}

func (o *agentOptions) validate() error {
	errs := []error{o.manager.Validate()}
	if o.hubKubeconfig == "" {
		errs = append(errs, errors.New("--hub-kubeconfig is required"))
	}
	if o.clusterName == "" {
		errs = append(errs, errors.New("--cluster-name is required"))
	} else if msgs := validation.IsDNS1123Label(o.clusterName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--cluster-name %q: %v", o.clusterName, msgs))
	}
	if o.heartbeatInterval <= 0 {
		errs = append(errs, fmt.Errorf("--heartbeat-interval must be positive, got %s", o.heartbeatInterval))
	}
	if o.fenceAfter <= o.heartbeatInterval {
		errs = append(errs, fmt.Errorf("--fence-after (%s) must be longer than --heartbeat-interval (%s), or the agent fences between two heartbeats",
			o.fenceAfter, o.heartbeatInterval))
	}
	return errors.Join(errs...)
}

// NewAgentCommand returns the agent's command.
func NewAgentCommand() *cobra.Command {
	o := newAgentOptions()
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "The dbfleet member agent (not implemented yet)",
		Long: `The dbfleet agent runs in a member cluster: it turns the cluster's MemberDatabases on the
hub into local StatefulSets, reports their status, renews the cluster's heartbeat Lease and
fences its primaries when it loses the hub.

Not implemented yet: this build validates the flags below and exits with an error. The agent
arrives with the member agent issue.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return errors.New("agent is not implemented yet: this build ships only the API (deploy/crds)")
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}
