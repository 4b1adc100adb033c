package placement

import (
	"math/rand/v2"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// genInput builds a random but valid Input from two seeds: up to 12 clusters spread over regions,
// zones and providers, with labels, taints, readiness and capacity; a random strategy with
// affinity, fallback affinities, tolerations, spread constraints and static weights; and often a
// previous decision produced by the engine itself for another replica count.
func genInput(seed1, seed2 uint64) Input {
	r := rand.New(rand.NewPCG(seed1, seed2))
	pick := func(options ...string) string { return options[r.IntN(len(options))] }
	chance := func(p float64) bool { return r.Float64() < p }

	names := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	n := 1 + r.IntN(len(names))

	in := Input{Replicas: int32(1 + r.IntN(15)), Now: t0}
	// Capacity is unlimited only when the database requests no resources, which holds for every
	// cluster at once; mixing would make Karmada's weight for unlimited clusters (spec.replicas)
	// depend on the replica count.
	allUnlimited := chance(0.2)
	for _, name := range names[:n] {
		c := Cluster{
			Name:     name,
			Region:   pick("r1", "r2", "r3", "r3", ""),
			Zone:     pick("z1", "z2", "z3", "z4", "z5", ""),
			Provider: pick("aws", "gcp", "gcp", ""),
			Labels:   map[string]string{"env": pick("prod", "dev"), "tier": pick("a", "b")},
			Ready:    chance(0.85),
		}
		if allUnlimited {
			c.Unlimited = true
		} else {
			c.AvailableReplicas = int32(r.IntN(13))
		}
		if chance(0.15) {
			t := corev1.Taint{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}
			if chance(0.8) {
				t.TimeAdded = &metav1.Time{Time: t0.Add(-time.Duration(r.IntN(40)) * time.Second)}
			}
			c.Taints = append(c.Taints, t)
		}
		if chance(0.1) {
			c.Taints = append(c.Taints, corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})
		}
		if chance(0.05) {
			c.Taints = append(c.Taints, corev1.Taint{Key: v1alpha1.TaintClusterNotReady, Effect: corev1.TaintEffectNoExecute})
		}
		in.Clusters = append(in.Clusters, c)
	}

	in.Placement = genPlacement(r, names[:n])
	for range r.IntN(3) {
		in.PreferredPrimaries = append(in.PreferredPrimaries, pick(names...))
	}
	in.Switchover = chance(0.1)
	if chance(0.6) {
		// A previous decision made by the engine for another replica count, so it is one the
		// engine could really have in force.
		prevIn := in
		prevIn.Replicas = int32(1 + r.IntN(15))
		prevIn.ReservedOrdinals = nil
		if d, err := Schedule(prevIn); err == nil {
			in.Previous = &d
		}
	} else if chance(0.3) {
		// An arbitrary previous decision, as a hand-edited or older status might hold.
		d := &Decision{Primary: pick(names...)}
		start := int32(0)
		for _, name := range names[:n] {
			if chance(0.5) {
				k := int32(1 + r.IntN(6))
				d.Shares = append(d.Shares, Share{Cluster: name, Replicas: k, Ordinals: v1alpha1.OrdinalRange{Start: start, Count: k}})
				start += k + int32(r.IntN(3))
			}
		}
		in.Previous = d
	}
	if chance(0.15) {
		// Ordinals still used by a draining share: consistent inputs never overlap Previous.
		reserved := v1alpha1.OrdinalRange{Start: int32(r.IntN(4))*OrdinalBlock + int32(r.IntN(3)), Count: int32(1 + r.IntN(5))}
		clash := false
		if in.Previous != nil {
			for _, sh := range in.Previous.Shares {
				a, b := rangeInterval(sh.Ordinals), rangeInterval(reserved)
				clash = clash || (a.start < b.end && b.start < a.end)
			}
		}
		if !clash {
			in.ReservedOrdinals = []v1alpha1.OrdinalRange{reserved}
		}
	}
	if chance(0.1) {
		// A version roll's switchover to the shares already on the new version. Drawn last, so
		// the rest of an input is what the same seeds gave before.
		for range 1 + r.IntN(3) {
			in.SwitchoverTo = append(in.SwitchoverTo, pick(names...))
		}
	}
	if chance(0.1) {
		// Clusters whose clocks disagree: no primary there. Drawn after everything else, for the
		// same reason.
		for range 1 + r.IntN(2) {
			in.NoPrimary = append(in.NoPrimary, pick(names...))
		}
	}
	return in
}

func genPlacement(r *rand.Rand, names []string) policyv1alpha1.Placement {
	chance := func(p float64) bool { return r.Float64() < p }
	var p policyv1alpha1.Placement
	switch r.IntN(5) {
	case 0:
		p = duplicatedPlacement()
	case 1:
		p = staticPlacement(nil)
		if chance(0.6) {
			p.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{}
			for range 1 + r.IntN(4) {
				p.ReplicaScheduling.WeightPreference.StaticWeightList = append(p.ReplicaScheduling.WeightPreference.StaticWeightList,
					policyv1alpha1.StaticClusterWeight{TargetCluster: genAffinity(r, names), Weight: int64(1 + r.IntN(5))})
			}
		}
	case 2:
		p = dynamicPlacement()
	case 3:
		p = aggregatedPlacement()
	default:
		if chance(0.5) {
			p = policyv1alpha1.Placement{} // no replicaScheduling: Duplicated, as in Karmada
		} else {
			p = dynamicPlacement()
		}
	}
	switch {
	case chance(0.35):
		a := genAffinity(r, names)
		p.ClusterAffinity = &a
	case chance(0.2):
		for i := range 1 + r.IntN(3) {
			p.ClusterAffinities = append(p.ClusterAffinities, policyv1alpha1.ClusterAffinityTerm{
				AffinityName: string(rune('p' + i)), ClusterAffinity: genAffinity(r, names)})
		}
	}
	if chance(0.6) {
		t := corev1.Toleration{Key: v1alpha1.TaintClusterUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}
		if chance(0.8) {
			t.TolerationSeconds = ptr.To(int64(r.IntN(30)))
		}
		p.ClusterTolerations = append(p.ClusterTolerations, t)
	}
	if chance(0.3) {
		p.ClusterTolerations = append(p.ClusterTolerations, corev1.Toleration{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule})
	}
	if chance(0.45) {
		for _, f := range []policyv1alpha1.SpreadFieldValue{"cluster", "region", "zone", "provider"} {
			if !chance(0.45) {
				continue
			}
			c := policyv1alpha1.SpreadConstraint{SpreadByField: f, MinGroups: r.IntN(3)}
			if chance(0.6) {
				c.MaxGroups = max(c.MinGroups, 1) + r.IntN(3)
			}
			p.SpreadConstraints = append(p.SpreadConstraints, c)
		}
	}
	return p
}

func genAffinity(r *rand.Rand, names []string) policyv1alpha1.ClusterAffinity {
	chance := func(p float64) bool { return r.Float64() < p }
	var a policyv1alpha1.ClusterAffinity
	if chance(0.35) {
		for _, n := range names {
			if chance(0.5) {
				a.ClusterNames = append(a.ClusterNames, n)
			}
		}
	}
	if chance(0.2) {
		a.ExcludeClusters = []string{names[r.IntN(len(names))]}
	}
	if chance(0.3) {
		a.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	}
	if chance(0.25) {
		op := corev1.NodeSelectorOpIn
		if chance(0.3) {
			op = corev1.NodeSelectorOpNotIn
		}
		a.FieldSelector = &policyv1alpha1.FieldSelector{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: []string{"region", "zone", "provider"}[r.IntN(3)], Operator: op, Values: []string{"r1", "z2", "gcp"}}}}
	}
	return a
}

// permuted returns the input with clusters and previous shares shuffled.
func permuted(in Input, seed uint64) Input {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := in
	out.Clusters = append([]Cluster(nil), in.Clusters...)
	r.Shuffle(len(out.Clusters), func(i, j int) { out.Clusters[i], out.Clusters[j] = out.Clusters[j], out.Clusters[i] })
	if in.Previous != nil {
		p := *in.Previous
		p.Shares = append([]Share(nil), p.Shares...)
		r.Shuffle(len(p.Shares), func(i, j int) { p.Shares[i], p.Shares[j] = p.Shares[j], p.Shares[i] })
		out.Previous = &p
	}
	return out
}

// applied returns the clusters as the next snapshot would show them once d is in force: every
// replica d adds to a capacity-limited cluster uses one of its available replicas.
func applied(in Input, d Decision) []Cluster {
	out := append([]Cluster(nil), in.Clusters...)
	for i := range out {
		c := &out[i]
		added := d.ShareOf(c.Name) - in.Previous.ShareOf(c.Name)
		if !c.Unlimited && added > 0 {
			c.AvailableReplicas = max(c.AvailableReplicas-added, 0)
		}
	}
	return out
}
