package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// t0 is the fixed "now" of the tests.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// ready returns a Ready cluster with the given available replicas.
func ready(name string, available int32) Cluster {
	return Cluster{Name: name, Ready: true, AvailableReplicas: available}
}

// unlimited returns a Ready cluster without a capacity limit.
func unlimited(name string) Cluster {
	return Cluster{Name: name, Ready: true, Unlimited: true}
}

func inRegion(c Cluster, region, zone string) Cluster {
	c.Region, c.Zone = region, zone
	return c
}

func withLabels(c Cluster, kv ...string) Cluster {
	c.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Labels[kv[i]] = kv[i+1]
	}
	return c
}

func withTaint(c Cluster, key string, effect corev1.TaintEffect, added *time.Time) Cluster {
	t := corev1.Taint{Key: key, Effect: effect}
	if added != nil {
		t.TimeAdded = &metav1.Time{Time: *added}
	}
	c.Taints = append(slices.Clone(c.Taints), t)
	return c
}

func notReady(c Cluster) Cluster {
	c.Ready = false
	return c
}

// Placements of each strategy.
func duplicatedPlacement() policyv1alpha1.Placement {
	return policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}}
}

func staticPlacement(weights map[string]int64) policyv1alpha1.Placement {
	rs := &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
	}
	if weights != nil {
		rs.WeightPreference = &policyv1alpha1.ClusterPreferences{}
		for _, name := range slices.Sorted(maps.Keys(weights)) {
			rs.WeightPreference.StaticWeightList = append(rs.WeightPreference.StaticWeightList, policyv1alpha1.StaticClusterWeight{
				TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{name}}, Weight: weights[name]})
		}
	}
	return policyv1alpha1.Placement{ReplicaScheduling: rs}
}

func dynamicPlacement() policyv1alpha1.Placement {
	return policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
	}}
}

func aggregatedPlacement() policyv1alpha1.Placement {
	return policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
	}}
}

// previous builds a previous decision from "name=replicas" pairs, ranges in name order from 0.
func previous(pairs ...any) *Decision {
	d := &Decision{}
	start := int32(0)
	for i := 0; i+1 < len(pairs); i += 2 {
		n := int32(pairs[i+1].(int))
		d.Shares = append(d.Shares, Share{Cluster: pairs[i].(string), Replicas: n,
			Ordinals: v1alpha1.OrdinalRange{Start: start, Count: n}})
		start += n
	}
	return d
}

// sharesOf renders the shares as "a=1 b=2" for compact assertions.
func sharesOf(d Decision) string {
	parts := make([]string, len(d.Shares))
	for i, s := range d.Shares {
		parts[i] = fmt.Sprintf("%s=%d", s.Cluster, s.Replicas)
	}
	return strings.Join(parts, " ")
}

func mustSchedule(t *testing.T, in Input) Decision {
	t.Helper()
	if in.Now.IsZero() {
		in.Now = t0
	}
	d, err := Schedule(in)
	if err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	if problems := checkDecision(in, d); len(problems) > 0 {
		t.Fatalf("decision %s violates invariants:\n%s", sharesOf(d), strings.Join(problems, "\n"))
	}
	return d
}

// notAtLeast reports clusters whose share in a is below their share in b, ignoring `except`.
func notAtLeast(a, b Decision, except ...string) string {
	var out []string
	for _, s := range b.Shares {
		if slices.Contains(except, s.Cluster) {
			continue
		}
		if got := a.ShareOf(s.Cluster); got < s.Replicas {
			out = append(out, fmt.Sprintf("%s %d -> %d", s.Cluster, s.Replicas, got))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, ", ") + fmt.Sprintf(" (before: %s, after: %s)", sharesOf(b), sharesOf(a))
}

// sharesAndPrimary renders shares with ordinals and the primary.
func sharesAndPrimary(d Decision) string {
	parts := make([]string, len(d.Shares))
	for i, s := range d.Shares {
		parts[i] = fmt.Sprintf("%s=%d@%d", s.Cluster, s.Replicas, s.Ordinals.Start)
	}
	return strings.Join(parts, " ") + " primary=" + d.Primary
}

// describe renders an input for failure messages.
func describe(in Input) string {
	var b strings.Builder
	fmt.Fprintf(&b, "replicas=%d preferred=%v switchover=%v switchoverTo=%v reserved=%v\n", in.Replicas, in.PreferredPrimaries, in.Switchover, in.SwitchoverTo, in.ReservedOrdinals)
	for _, c := range in.Clusters {
		fmt.Fprintf(&b, "  cluster %s ready=%v avail=%d unlimited=%v region=%q zone=%q provider=%q labels=%v", c.Name, c.Ready, c.AvailableReplicas, c.Unlimited, c.Region, c.Zone, c.Provider, c.Labels)
		for _, t := range c.Taints {
			fmt.Fprintf(&b, " taint=%s", t.ToString())
			if t.TimeAdded != nil {
				fmt.Fprintf(&b, "@%s", t.TimeAdded.Sub(in.Now))
			}
		}
		b.WriteByte('\n')
	}
	p := in.Placement
	fmt.Fprintf(&b, "  strategy=%v", resolveStrategy(&p))
	if p.ReplicaScheduling != nil && p.ReplicaScheduling.WeightPreference != nil {
		for _, w := range p.ReplicaScheduling.WeightPreference.StaticWeightList {
			fmt.Fprintf(&b, " weight(%+v)=%d", w.TargetCluster, w.Weight)
		}
	}
	if p.ClusterAffinity != nil {
		fmt.Fprintf(&b, " affinity=%+v", *p.ClusterAffinity)
	}
	for _, t := range p.ClusterAffinities {
		fmt.Fprintf(&b, " affinities[%s]=%+v", t.AffinityName, t.ClusterAffinity)
	}
	for _, t := range p.ClusterTolerations {
		fmt.Fprintf(&b, " toleration=%s:%s", t.Key, t.Effect)
		if t.TolerationSeconds != nil {
			fmt.Fprintf(&b, "/%ds", *t.TolerationSeconds)
		}
	}
	for _, s := range p.SpreadConstraints {
		fmt.Fprintf(&b, " spread=%s[%d,%d]", s.SpreadByField, s.MinGroups, s.MaxGroups)
	}
	if in.Previous != nil {
		fmt.Fprintf(&b, "\n  previous=%s", sharesAndPrimary(*in.Previous))
	}
	return b.String()
}

func labelSelector(key, value string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
}

// clusterField is the cluster's value of the field named provider, region or zone (its name for
// any other), as fieldSelector and spreadConstraints read it.
func clusterField(c *Cluster, name string) string {
	switch name {
	case "provider":
		return c.Provider
	case "region":
		return c.Region
	case "zone":
		return c.Zone
	default:
		return c.Name
	}
}
