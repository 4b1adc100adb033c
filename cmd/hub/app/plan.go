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
		showAll    bool
	)
	cmd := &cobra.Command{
		Use:   "plan (-f FILE... | --kubeconfig HUB)",
		Short: "Show where DatabaseClusters would be placed, without changing anything",
		Long: `Plan runs the hub's policy matching and placement engine over DatabaseClusters,
(Cluster)PropagationPolicies and MemberClusters read from YAML files (-f, repeatable, multi-document)
or from a live hub (--kubeconfig), and prints for every DatabaseCluster the clusters, replicas,
ordinals and primary it would get, and every cluster not chosen with its reason.

Objects read from files are admitted as the hub's API server would admit them, with the CRDs'
own OpenAPI schemas, defaults and CEL rules (carried in this binary), DNS names and no object
twice; every error names its file, document (from 1), object and field. The status the hub would
write is checked the same way.

A DatabaseCluster with more than 20 clusters not chosen gets a summary of them by reason;
--show-all-exclusions lists each one.

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
				if fleet, err = plan.LoadFiles(cmd.Context(), files); err != nil {
					return err
				}
				fleet.AssumeReady()
			} else {
				cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
				if err != nil {
					return fmt.Errorf("load --kubeconfig: %w", err)
				}
				c, err := client.New(directConfig(cfg), client.Options{Scheme: scheme.New()})
				if err != nil {
					return err
				}
				if fleet, err = plan.LoadHub(cmd.Context(), c, namespace); err != nil {
					return err
				}
			}
			results := plan.Run(fleet, time.Now())
			if err := plan.CheckStatus(cmd.Context(), results); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output == "table" {
				err = plan.PrintTable(out, results, plan.TableOptions{ShowAllExclusions: showAll})
			} else {
				err = plan.PrintObjects(out, results, output)
			}
			if err != nil {
				return err
			}
			unschedulable := 0
			var refused []error
			for i := range results {
				r := &results[i]
				if !r.Schedulable() {
					unschedulable++
				}
				for _, fe := range r.Refused {
					refused = append(refused, fmt.Errorf("DatabaseCluster %s/%s: the API server would refuse the status the hub would write: %w", r.Database.Namespace, r.Database.Name, fe))
				}
			}
			if unschedulable > 0 {
				return errors.Join(append(refused, fmt.Errorf("%d of %d DatabaseClusters are not schedulable", unschedulable, len(results)))...)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "YAML file with DatabaseClusters, policies and MemberClusters (repeatable)")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "read the fleet from the hub this kubeconfig reaches")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "with --kubeconfig: only DatabaseClusters of this namespace")
	cmd.Flags().BoolVar(&showAll, "show-all-exclusions", false, "list every cluster not chosen, however many (by default more than 20 are summarised by reason)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, yaml or json (yaml and json print each DatabaseCluster with the status the hub would write)")
	return cmd
}
