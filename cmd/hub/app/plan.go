package app

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/plan"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

func newPlanCommand() *cobra.Command {
	var (
		files      []string
		kubeconfig string
		namespace  string
		output     string
	)
	cmd := &cobra.Command{
		Use:   "plan (-f FILE... | --kubeconfig HUB)",
		Short: "Show where DatabaseClusters would be placed, without changing anything",
		Long: `Plan runs the hub's policy matching and placement engine over DatabaseClusters,
(Cluster)PropagationPolicies and MemberClusters read from YAML files (-f, repeatable, multi-document)
or from a live hub (--kubeconfig), and prints for every DatabaseCluster the clusters, replicas,
ordinals and primary it would get, and every cluster not chosen with its reason.

MemberClusters in files without a Ready condition are taken as Ready. Capacity-based placement
(dynamicWeight, Aggregated) needs status.resourceSummary on the MemberClusters, as on a real hub.

Exit status: 0 when every DatabaseCluster is schedulable, 1 otherwise (or on bad input).`,
		Example: `  hub plan -f deploy/samples/plan/static-weights.yaml
  hub plan -f fleet.yaml -f policies.yaml -o yaml
  hub plan --kubeconfig ~/.kube/hub -n shop`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (len(files) == 0) == (kubeconfig == "") {
				return errors.New("give either -f FILE (one or more) or --kubeconfig, not both and not neither")
			}
			if output != "table" && output != "yaml" && output != "json" {
				return fmt.Errorf("-o %q: use table, yaml or json", output)
			}
			var fleet *plan.Fleet
			var err error
			if len(files) > 0 {
				if fleet, err = plan.LoadFiles(files); err != nil {
					return err
				}
				fleet.AssumeReady()
			} else {
				cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
				if err != nil {
					return fmt.Errorf("load --kubeconfig: %w", err)
				}
				c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
				if err != nil {
					return err
				}
				if fleet, err = plan.LoadHub(cmd.Context(), c, namespace); err != nil {
					return err
				}
			}
			results := plan.Run(fleet, time.Now())
			out := cmd.OutOrStdout()
			if output == "table" {
				err = plan.PrintTable(out, results)
			} else {
				err = plan.PrintObjects(out, results, output)
			}
			if err != nil {
				return err
			}
			unschedulable := 0
			for i := range results {
				if !results[i].Schedulable() {
					unschedulable++
				}
			}
			if unschedulable > 0 {
				return fmt.Errorf("%d of %d DatabaseClusters are not schedulable", unschedulable, len(results))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file with DatabaseClusters, policies and MemberClusters (repeatable)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "read the fleet from the hub this kubeconfig reaches")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "with --kubeconfig: only DatabaseClusters of this namespace")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, yaml or json (yaml and json print each DatabaseCluster with the status the hub would write)")
	return cmd
}
