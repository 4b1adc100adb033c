package plan

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
)

// TableOptions shape PrintTable's output.
type TableOptions struct {
	// ShowAllExclusions lists every cluster not chosen. Otherwise a DatabaseCluster with more than
	// MaxListedExclusions of them gets a summary: one line per reason, with a count and a few names.
	ShowAllExclusions bool
}

// MaxListedExclusions is how many clusters not chosen PrintTable lists one by one before it
// summarises them by reason.
const MaxListedExclusions = 20

// namesPerReason is how many cluster names a summary line shows.
const namesPerReason = 3

// PrintTable writes a human-readable plan: one block per DatabaseCluster with its shares and the
// clusters not chosen with their reasons (summarised by reason on a large fleet, see
// TableOptions), or what the API server would refuse in the status the hub would write.
func PrintTable(w io.Writer, results []Result, opts TableOptions) error {
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
		for _, fe := range r.Refused {
			fmt.Fprintf(tw, "  the API server would refuse the status the hub would write: %s\n", fe)
		}
		switch {
		case len(r.Excluded) == 0:
		case opts.ShowAllExclusions || len(r.Excluded) <= MaxListedExclusions:
			fmt.Fprintln(tw, "  NOT CHOSEN\tREASON")
			for _, e := range r.Excluded {
				why := e.Reason
				if e.Message != "" && e.Message != e.Reason {
					why += ": " + e.Message
				}
				fmt.Fprintf(tw, "  %s\t%s\n", e.Cluster, why)
			}
		default:
			fmt.Fprintln(tw, "  NOT CHOSEN\tREASON")
			for _, g := range byReason(r.Excluded) {
				names := strings.Join(g.clusters[:min(len(g.clusters), namesPerReason)], ", ")
				if more := len(g.clusters) - namesPerReason; more > 0 {
					names += fmt.Sprintf(" and %d more", more)
				}
				fmt.Fprintf(tw, "  %s\t%s: %s\n", clusters(len(g.clusters)), g.reason, names)
			}
			fmt.Fprintf(tw, "  (%d clusters not chosen, summarised by reason: --show-all-exclusions lists each)\n", len(r.Excluded))
		}
	}
	return tw.Flush()
}

func clusters(n int) string {
	if n == 1 {
		return "1 cluster"
	}
	return fmt.Sprintf("%d clusters", n)
}

type reasonGroup struct {
	reason   string
	clusters []string
}

// byReason groups exclusions by reason, the largest group first, then by reason.
func byReason(excluded []placement.Exclusion) []reasonGroup {
	index := map[string]int{}
	var groups []reasonGroup
	for _, e := range excluded {
		i, ok := index[e.Reason]
		if !ok {
			i = len(groups)
			index[e.Reason] = i
			groups = append(groups, reasonGroup{reason: e.Reason})
		}
		groups[i].clusters = append(groups[i].clusters, e.Cluster)
	}
	for _, g := range groups {
		slices.Sort(g.clusters)
	}
	slices.SortFunc(groups, func(a, b reasonGroup) int {
		if c := cmp.Compare(len(b.clusters), len(a.clusters)); c != 0 {
			return c
		}
		return strings.Compare(a.reason, b.reason)
	})
	return groups
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
