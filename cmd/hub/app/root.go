package app

import (
	"github.com/spf13/cobra"
)

// NewHubCommand returns the hub's root command.
func NewHubCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "The dbfleet hub: places DatabaseClusters across member clusters",
		Long: `The dbfleet hub places the replicas of each DatabaseCluster across member clusters
according to PropagationPolicies, and aggregates what the member agents report.`,
		SilenceUsage: true,
	}
	cmd.AddCommand(newRunCommand(), newPlanCommand())
	cmd.AddCommand(newJoinCommand(), newUnjoinCommand())
	return cmd
}
