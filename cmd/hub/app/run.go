package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbfleet/dbfleet/pkg/options"
)

// runOptions are the flags of "hub run".
type runOptions struct {
	manager *options.Manager

	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
}

func newRunOptions() *runOptions {
	return &runOptions{
		manager:                 options.NewManager(),
		leaderElect:             true,
		leaderElectionNamespace: "dbfleet-system",
		leaderElectionID:        "dbfleet-hub",
		leaseDuration:           15 * time.Second,
		renewDeadline:           10 * time.Second,
		retryPeriod:             2 * time.Second,
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
	return errors.Join(errs...)
}

func newRunCommand() *cobra.Command {
	o := newRunOptions()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the hub controller manager (not implemented yet)",
		Long: `Run the hub controller manager against the hub API server.

Not implemented yet: this build validates the flags below and exits with an error. The control
loop (policy matching, scheduling, propagation, status aggregation) arrives with the hub issue.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return errors.New("hub run is not implemented yet: this build ships only the API (deploy/crds)")
		},
	}
	o.addFlags(cmd.Flags())
	return cmd
}
