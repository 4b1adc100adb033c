package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// render is the live table: one row per member (its health on the hub, its share of the
// database, and the pods really running in it), then the database's aggregated status.
func render(s *snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  ┌ %s/%s at +%.0fs\n", demoNamespace, demoDatabase, since().Seconds())
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  │ CLUSTER\tMEMBER READY\tTAINTS\tSHARE\tORDINALS\tROLE\tSTATE\tPODS READY\tPRIMARY POD\tPRIMARY LEASE")
	for _, m := range s.members {
		share, ordinals, role, state := "-", "-", "-", "-"
		if p := s.placement(m.name); p != nil {
			share, role, state = fmt.Sprint(p.Replicas), string(p.Role), string(p.State)
			ordinals = ordinalRange(p.Ordinals)
			if role == "" {
				role = "-"
			}
			if state == "" {
				state = "-"
			}
		}
		pods := fmt.Sprintf("%d/%d", m.podsReady, m.pods)
		if m.err != "" {
			pods = "unreachable"
		}
		var primary []string
		primary = append(primary, m.primaryPods...)
		for _, p := range m.fencedPods {
			primary = append(primary, p+" (fenced)")
		}
		if len(primary) == 0 {
			primary = []string{"-"}
		}
		fmt.Fprintf(w, "  │ %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.name, m.ready, shortTaints(m.taints), share, ordinals, role, state, pods,
			strings.Join(primary, ","), leaseText(m, s.at))
	}
	_ = w.Flush()
	switch {
	case s.hubErr != "":
		fmt.Fprintf(&b, "  └ the hub does not answer: %s\n", s.hubErr)
	case s.db == nil:
		fmt.Fprintf(&b, "  └ no DatabaseCluster %s/%s\n", demoNamespace, demoDatabase)
	default:
		cluster, epoch := s.primary()
		if cluster == "" {
			cluster = "none yet"
		}
		fmt.Fprintf(&b, "  │ ready %d/%d, primary %s (epoch %d)\n", s.db.Status.ReadyReplicas, s.db.Spec.Replicas, cluster, epoch)
		var conds []string
		for _, t := range []string{dbfleetv1alpha1.ConditionScheduled, dbfleetv1alpha1.ConditionPropagated, dbfleetv1alpha1.ConditionAvailable,
			dbfleetv1alpha1.ConditionProgressing, dbfleetv1alpha1.ConditionDegraded, dbfleetv1alpha1.ConditionFailoverInProgress} {
			status := "?"
			if c := s.condition(t); c != nil {
				status = string(c.Status)
			}
			conds = append(conds, t+"="+status)
		}
		fmt.Fprintf(&b, "  └ %s\n", strings.Join(conds, "  "))
	}
	return b.String()
}

// leaseText is "east/1, 9s left", "east/1, expired 3s ago" or "-".
func leaseText(m memberView, at time.Time) string {
	switch {
	case m.leaseHolder == "":
		return "-"
	case m.leaseExpiry.IsZero():
		return m.leaseHolder
	case m.leaseValid:
		return fmt.Sprintf("%s, %.0fs left", m.leaseHolder, m.leaseExpiry.Sub(at).Seconds())
	}
	return fmt.Sprintf("%s, expired %.0fs ago", m.leaseHolder, at.Sub(m.leaseExpiry).Seconds())
}

func ordinalRange(o dbfleetv1alpha1.OrdinalRange) string {
	switch o.Count {
	case 0:
		return "-"
	case 1:
		return fmt.Sprint(o.Start)
	}
	return fmt.Sprintf("%d-%d", o.Start, o.Start+o.Count-1)
}

// shortTaints folds "dbfleet.io/unreachable:NoExecute" and its NoSchedule twin into "unreachable".
func shortTaints(taints []string) string {
	if len(taints) == 0 {
		return "-"
	}
	var keys []string
	for _, t := range taints {
		key, _, _ := strings.Cut(t, ":")
		key = strings.TrimPrefix(key, "dbfleet.io/")
		if len(keys) == 0 || keys[len(keys)-1] != key {
			keys = append(keys, key)
		}
	}
	return strings.Join(keys, ",")
}

// conditionText is "Available=Unknown (PrimaryClusterUnknown: ...)".
func conditionText(c *metav1.Condition) string {
	if c == nil {
		return "absent"
	}
	return fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message)
}
