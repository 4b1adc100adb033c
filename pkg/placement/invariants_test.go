package placement

import (
	"fmt"
	"slices"
	"strings"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// checkDecision verifies every property a single decision must have, with oracles written
// independently of the engine (Kubernetes' own ToleratesTaint, apimachinery selectors). It
// returns one line per violation.
func checkDecision(in Input, d Decision) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	byName := map[string]*Cluster{}
	for i := range in.Clusters {
		byName[in.Clusters[i].Name] = &in.Clusters[i]
	}
	prevShare := map[string]int32{}
	if in.Previous != nil {
		for _, s := range in.Previous.Shares {
			if _, dup := prevShare[s.Cluster]; !dup && s.Replicas > 0 {
				prevShare[s.Cluster] = s.Replicas
			}
		}
	}

	// Shares and exclusions partition the input, each sorted by name.
	seen := map[string]bool{}
	var sum int64
	for i, s := range d.Shares {
		if i > 0 && d.Shares[i-1].Cluster >= s.Cluster {
			fail("shares not strictly sorted at %q", s.Cluster)
		}
		if byName[s.Cluster] == nil {
			fail("share for unknown cluster %q", s.Cluster)
		}
		if s.Replicas <= 0 {
			fail("share %q has %d replicas", s.Cluster, s.Replicas)
		}
		seen[s.Cluster] = true
		sum += int64(s.Replicas)
	}
	for i, e := range d.Excluded {
		if i > 0 && d.Excluded[i-1].Cluster >= e.Cluster {
			fail("exclusions not strictly sorted at %q", e.Cluster)
		}
		if seen[e.Cluster] {
			fail("cluster %q both has a share and is excluded", e.Cluster)
		}
		if e.Reason == "" || e.Message == "" {
			fail("exclusion of %q lacks a reason or message: %+v", e.Cluster, e)
		}
		seen[e.Cluster] = true
	}
	if len(seen) != len(in.Clusters) {
		fail("shares and exclusions cover %d of %d clusters", len(seen), len(in.Clusters))
	}

	// Replica counts by strategy.
	strat := resolveStrategy(&in.Placement)
	if strat == duplicated {
		for _, s := range d.Shares {
			if s.Replicas > in.Replicas {
				fail("duplicated share %q has %d > %d replicas", s.Cluster, s.Replicas, in.Replicas)
			}
		}
	} else if sum != int64(in.Replicas) {
		fail("divided shares sum to %d, want %d", sum, in.Replicas)
	}

	// No replica where affinity, spread fields, taints or readiness forbid it.
	aff := in.Placement.ClusterAffinity
	if d.AffinityName != "" {
		aff = nil
		for i := range in.Placement.ClusterAffinities {
			if in.Placement.ClusterAffinities[i].AffinityName == d.AffinityName {
				aff = &in.Placement.ClusterAffinities[i].ClusterAffinity
			}
		}
		if aff == nil {
			fail("affinity name %q is not a term", d.AffinityName)
		}
	} else if len(in.Placement.ClusterAffinities) > 0 && len(d.Shares) > 0 {
		fail("clusterAffinities set but the decision names no term")
	}
	for _, s := range d.Shares {
		c := byName[s.Cluster]
		if c == nil {
			continue
		}
		if aff != nil && !oracleAffinity(aff, c) {
			fail("share on %q which the affinity excludes", s.Cluster)
		}
		for _, sc := range in.Placement.SpreadConstraints {
			if f := string(sc.SpreadByField); f != "" && f != "cluster" && clusterField(c, f) == "" {
				fail("share on %q which lacks spread field %s", s.Cluster, f)
			}
		}
		evicted, mayGrow := oracleHealth(c, in.Placement.ClusterTolerations, in.Now)
		if evicted {
			fail("share on %q which a NoExecute taint evicts", s.Cluster)
		}
		if !mayGrow && s.Replicas > prevShare[s.Cluster] {
			fail("%q may not gain replicas but went from %d to %d", s.Cluster, prevShare[s.Cluster], s.Replicas)
		}
		if strat.capacityBound() && !c.Unlimited && int64(s.Replicas) > int64(prevShare[s.Cluster])+int64(max(c.AvailableReplicas, 0)) {
			fail("%q got %d replicas, more than its previous %d plus %d available", s.Cluster, s.Replicas, prevShare[s.Cluster], c.AvailableReplicas)
		}
	}

	problems = append(problems, checkOrdinals(in, d)...)
	problems = append(problems, checkPrimary(in, d)...)
	return problems
}

// checkOrdinals: ranges match the shares, never overlap each other, the reserved ranges or another
// cluster's previous range, and keep their start when the share did not grow.
func checkOrdinals(in Input, d Decision) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	type owned struct {
		iv    interval
		owner string
	}
	var mine, others []owned
	for _, s := range d.Shares {
		if s.Ordinals.Count != s.Replicas || s.Ordinals.Start < 0 {
			fail("share %q has ordinals %+v for %d replicas", s.Cluster, s.Ordinals, s.Replicas)
		}
		mine = append(mine, owned{rangeInterval(s.Ordinals), s.Cluster})
	}
	for _, r := range in.ReservedOrdinals {
		others = append(others, owned{rangeInterval(r), ""})
	}
	prevRange := map[string]Share{}
	if in.Previous != nil {
		for _, s := range in.Previous.Shares {
			// Ranges of a corrupt previous decision overlap each other; they cannot all be avoided.
			if prevRangesDisjoint(in) {
				others = append(others, owned{rangeInterval(s.Ordinals), s.Cluster})
			}
			prevRange[s.Cluster] = s
		}
	}
	for i, a := range mine {
		for _, b := range mine[i+1:] {
			if a.iv.start < b.iv.end && b.iv.start < a.iv.end {
				fail("ordinals of %q and %q overlap", a.owner, b.owner)
			}
		}
		for _, b := range others {
			if b.owner != a.owner && b.iv.start < b.iv.end && a.iv.start < b.iv.end && b.iv.start < a.iv.end {
				fail("ordinals of %q %v overlap the previous or reserved range of %q %v", a.owner, a.iv, b.owner, b.iv)
			}
		}
	}
	if prevRangesDisjoint(in) {
		for _, s := range d.Shares {
			p, ok := prevRange[s.Cluster]
			if ok && p.Replicas > 0 && p.Ordinals.Count > 0 && s.Replicas <= p.Ordinals.Count && s.Ordinals.Start != p.Ordinals.Start {
				fail("share %q did not grow (%d -> %d) but moved from ordinal %d to %d", s.Cluster, p.Replicas, s.Replicas, p.Ordinals.Start, s.Ordinals.Start)
			}
		}
	}
	return problems
}

func prevRangesDisjoint(in Input) bool {
	if in.Previous == nil {
		return true
	}
	var ivs []interval
	for _, s := range in.Previous.Shares {
		ivs = append(ivs, rangeInterval(s.Ordinals))
	}
	slices.SortFunc(ivs, func(a, b interval) int { return int(a.start - b.start) })
	for i := 1; i < len(ivs); i++ {
		if ivs[i].start < ivs[i-1].end {
			return false
		}
	}
	return true
}

// checkPrimary: the primary is a holder, stays while healthy, else follows the preference.
func checkPrimary(in Input, d Decision) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(d.Shares) == 0 {
		if d.Primary != "" {
			fail("primary %q without shares", d.Primary)
		}
		return problems
	}
	if !slices.ContainsFunc(d.Shares, func(s Share) bool { return s.Cluster == d.Primary }) {
		fail("primary %q holds no share", d.Primary)
		return problems
	}
	healthy := func(name string) bool {
		for i := range in.Clusters {
			c := &in.Clusters[i]
			if c.Name == name {
				_, mayGrow := oracleHealth(c, in.Placement.ClusterTolerations, in.Now)
				return c.Ready && (mayGrow || !evictingOracle(c, in.Placement.ClusterTolerations, in.Now)) && !slices.Contains(in.NoPrimary, name)
			}
		}
		return false
	}
	holds := func(name string) bool {
		return slices.ContainsFunc(d.Shares, func(s Share) bool { return s.Cluster == name })
	}
	firstPreferred := ""
	for _, p := range in.PreferredPrimaries {
		if holds(p) && healthy(p) {
			firstPreferred = p
			break
		}
	}
	prev := ""
	if in.Previous != nil {
		prev = in.Previous.Primary
	}
	canTake := func(name string) bool { return slices.Contains(in.SwitchoverTo, name) && holds(name) && healthy(name) }
	switch {
	case len(in.SwitchoverTo) > 0 && prev != "" && holds(prev) && healthy(prev):
		// A switchover to a set: into the set when one of it can take the primary, else it stays.
		target := slices.ContainsFunc(d.Shares, func(s Share) bool { return canTake(s.Cluster) })
		switch {
		case slices.Contains(in.SwitchoverTo, prev) || !target:
			if d.Primary != prev {
				fail("switchover to %v: primary should stay on %q, got %q", in.SwitchoverTo, prev, d.Primary)
			}
		case !canTake(d.Primary):
			fail("switchover to %v: primary %q is not one of them that can take it", in.SwitchoverTo, d.Primary)
		}
	case in.Switchover && firstPreferred != "":
		if d.Primary != firstPreferred {
			fail("switchover should move the primary to %q, got %q", firstPreferred, d.Primary)
		}
	case prev != "" && holds(prev) && healthy(prev):
		if d.Primary != prev {
			fail("primary moved from healthy holder %q to %q", prev, d.Primary)
		}
	default:
		// The healthy holders that have come furthest in the WAL; then preference; then size.
		var furthest []string
		var top WALProgress
		for _, s := range d.Shares {
			if !healthy(s.Cluster) {
				continue
			}
			switch c := in.Progress[s.Cluster].Compare(top); {
			case len(furthest) == 0 || c > 0:
				furthest, top = []string{s.Cluster}, in.Progress[s.Cluster]
			case c == 0:
				furthest = append(furthest, s.Cluster)
			}
		}
		preferredOfThem := ""
		for _, p := range in.PreferredPrimaries {
			if slices.Contains(furthest, p) {
				preferredOfThem = p
				break
			}
		}
		if preferredOfThem != "" {
			if d.Primary != preferredOfThem {
				fail("primary should follow the preference to %q, got %q", preferredOfThem, d.Primary)
			}
			break
		}
		best := ""
		var bestN int32
		for _, s := range d.Shares {
			if slices.Contains(furthest, s.Cluster) && s.Replicas > bestN {
				best, bestN = s.Cluster, s.Replicas
			}
		}
		if best != "" && d.Primary != best {
			fail("primary should be the healthy cluster furthest in the WAL, then with most replicas %q, got %q", best, d.Primary)
		}
	}
	return problems
}

// withDefaults adds the default 10 s tolerations (docs/placement.md) of the hub's health taints when the placement
// has none that tolerate them.
func withDefaults(tolerations []corev1.Toleration) []corev1.Toleration {
	out := slices.Clone(tolerations)
	for _, key := range []string{"dbfleet.io/unreachable", "dbfleet.io/not-ready"} {
		taint := corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute}
		if !slices.ContainsFunc(tolerations, func(t corev1.Toleration) bool { return t.ToleratesTaint(klog.Background(), &taint, false) }) {
			ten := int64(10)
			out = append(out, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &ten})
		}
	}
	return out
}

// oracleHealth says whether a NoExecute taint evicts the cluster, and whether it may gain replicas.
func oracleHealth(c *Cluster, tolerations []corev1.Toleration, now time.Time) (evicted, mayGrow bool) {
	tolerations = withDefaults(tolerations)
	mayGrow = c.Ready
	for i := range c.Taints {
		taint := c.Taints[i]
		var matching []corev1.Toleration
		for _, t := range tolerations {
			if t.ToleratesTaint(klog.Background(), &taint, false) {
				matching = append(matching, t)
			}
		}
		switch taint.Effect {
		case corev1.TaintEffectNoSchedule:
			if len(matching) == 0 {
				mayGrow = false
			}
		case corev1.TaintEffectNoExecute:
			if len(matching) == 0 {
				return true, false
			}
			var limit *int64
			for _, t := range matching {
				if t.TolerationSeconds != nil && (limit == nil || *t.TolerationSeconds < *limit) {
					limit = t.TolerationSeconds
				}
			}
			if limit == nil {
				continue
			}
			added := now
			if taint.TimeAdded != nil {
				added = taint.TimeAdded.Time
			}
			if *limit <= 0 || !now.Before(added.Add(time.Duration(*limit)*time.Second)) {
				return true, false
			}
			mayGrow = false
		}
	}
	return false, mayGrow
}

// evictingOracle says whether a NoExecute toleration is counting down on the cluster.
func evictingOracle(c *Cluster, tolerations []corev1.Toleration, now time.Time) bool {
	tolerations = withDefaults(tolerations)
	for i := range c.Taints {
		taint := c.Taints[i]
		if taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		for _, t := range tolerations {
			if t.ToleratesTaint(klog.Background(), &taint, false) && t.TolerationSeconds != nil {
				return true
			}
		}
	}
	return false
}

// oracleAffinity is Karmada's util.ClusterMatches restated on our Cluster.
func oracleAffinity(a *policyv1alpha1.ClusterAffinity, c *Cluster) bool {
	if slices.Contains(a.ExcludeClusters, c.Name) {
		return false
	}
	if len(a.ClusterNames) > 0 && !slices.Contains(a.ClusterNames, c.Name) {
		return false
	}
	if a.LabelSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(a.LabelSelector)
		if err != nil || !sel.Matches(labels.Set(c.Labels)) {
			return false
		}
	}
	if a.FieldSelector != nil {
		fields := labels.Set{}
		for _, f := range []string{"provider", "region", "zone"} {
			if v := clusterField(c, f); v != "" {
				fields[f] = v
			}
		}
		for _, e := range a.FieldSelector.MatchExpressions {
			v, has := fields[e.Key]
			switch e.Operator {
			case corev1.NodeSelectorOpIn:
				if !has || !slices.Contains(e.Values, v) {
					return false
				}
			case corev1.NodeSelectorOpNotIn:
				if has && slices.Contains(e.Values, v) {
					return false
				}
			}
		}
	}
	return true
}

// sameDecision compares two decisions field by field, for determinism and fixed-point checks.
func sameDecision(a, b Decision) string {
	if fmt.Sprint(a.Shares) != fmt.Sprint(b.Shares) {
		return fmt.Sprintf("shares %v vs %v", a.Shares, b.Shares)
	}
	if a.Primary != b.Primary || a.AffinityName != b.AffinityName {
		return fmt.Sprintf("primary/affinity %q/%q vs %q/%q", a.Primary, a.AffinityName, b.Primary, b.AffinityName)
	}
	if fmt.Sprint(a.Excluded) != fmt.Sprint(b.Excluded) {
		return fmt.Sprintf("exclusions\n%v\nvs\n%v", a.Excluded, b.Excluded)
	}
	return ""
}

var _ = strings.Join
