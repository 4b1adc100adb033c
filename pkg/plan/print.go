package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// PrintTable writes a human-readable plan: one block per DatabaseCluster with its shares and the
// clusters not chosen, each with its reason.
func PrintTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, r := range results {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		dbc := r.Database
		policy := "none"
		if p := dbc.Status.Policy; p != nil {
			policy = p.Kind + " " + p.Name
			if p.Namespace != "" {
				policy = p.Kind + " " + p.Namespace + "/" + p.Name
			}
		}
		fmt.Fprintf(tw, "DatabaseCluster %s/%s: %d replicas, policy %s\n", dbc.Namespace, dbc.Name, dbc.Spec.Replicas, policy)
		if c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled); c != nil && c.Status != "True" {
			fmt.Fprintf(tw, "  %s: %s\n", c.Reason, c.Message)
		}
		if r.Schedulable() {
			fmt.Fprintln(tw, "  CLUSTER\tREPLICAS\tORDINALS\tROLE")
			for _, p := range dbc.Status.Placements {
				role := string(p.Role)
				if p.Role == dbfleetv1alpha1.RolePrimary {
					role = fmt.Sprintf("primary (epoch %d)", dbc.Status.Primary.Epoch)
				}
				fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\n", p.Cluster, p.Replicas, ordinals(p.Ordinals), role)
			}
		}
		if len(r.Excluded) > 0 {
			fmt.Fprintln(tw, "  NOT CHOSEN\tREASON")
			for _, e := range r.Excluded {
				why := e.Reason
				if e.Message != "" && e.Message != e.Reason {
					why += ": " + e.Message
				}
				fmt.Fprintf(tw, "  %s\t%s\n", e.Cluster, why)
			}
		}
	}
	return tw.Flush()
}

func ordinals(r dbfleetv1alpha1.OrdinalRange) string {
	if r.Count <= 1 {
		return fmt.Sprint(r.Start)
	}
	return fmt.Sprintf("%d-%d", r.Start, r.Start+r.Count-1)
}

// PrintObjects writes each DatabaseCluster as the hub would write it, status included: a kubectl
// style List in JSON, or YAML documents.
func PrintObjects(w io.Writer, results []Result, format string) error {
	items := make([]*dbfleetv1alpha1.DatabaseCluster, len(results))
	for i, r := range results {
		dbc := r.Database.DeepCopy()
		dbc.APIVersion, dbc.Kind = dbfleetv1alpha1.GroupVersion.String(), "DatabaseCluster"
		items[i] = dbc
	}
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	case "yaml":
		for _, item := range items {
			out, err := yaml.Marshal(item)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "---\n%s", out); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("unknown output format %q: use table, yaml or json", format)
	}
}
