package placement

import (
	"cmp"
	"fmt"
	"slices"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

// compiled is a Placement checked and turned into matchers once per decision.
type compiled struct {
	strat  strategy
	spread spreadSpec
	// terms are the cluster affinities to try in order: clusterAffinities, or the single
	// clusterAffinity (nil matching every cluster).
	terms   []term
	statics []staticRule
	// byLabel is statics when they all test the same label, as one lookup (see staticsByLabel).
	byLabel *labelWeights
	// tolerations are the placement's, with the defaults of EffectiveTolerations.
	tolerations []corev1.Toleration
}

type term struct {
	name string // clusterAffinities[].affinityName; empty for clusterAffinity
	aff  *affinity
	// whys numbers the explanation of each mismatch once it is met (see scheduler.termWhy).
	whys [numMismatches]explID
}

// staticRule is one staticWeightList entry.
type staticRule struct {
	target *affinity
	weight int64
}

// Validate reports whether the engine supports every field of the placement. The hub and
// `hub plan` call it to reject policies with a message naming the field; Schedule calls it too.
func Validate(p *policyv1alpha1.Placement) error {
	_, err := compile(p, DefaultTolerationSeconds)
	return err
}

func compile(p *policyv1alpha1.Placement, defaultToleration int64) (*compiled, error) {
	c := &compiled{strat: resolveStrategy(p)}
	if err := checkReplicaScheduling(p.ReplicaScheduling); err != nil {
		return nil, err
	}
	if err := checkTolerations(p.ClusterTolerations); err != nil {
		return nil, err
	}
	c.tolerations = EffectiveTolerations(p.ClusterTolerations, defaultToleration)
	spread, err := compileSpread(p)
	if err != nil {
		return nil, err
	}
	c.spread = spread

	if p.ClusterAffinity != nil && len(p.ClusterAffinities) > 0 {
		return nil, fmt.Errorf("%w: clusterAffinity and clusterAffinities cannot both be set", ErrInvalidPlacement)
	}
	if len(p.ClusterAffinities) == 0 {
		aff, err := compileAffinity(p.ClusterAffinity, affinityPath{})
		if err != nil {
			return nil, err
		}
		c.terms = []term{{aff: aff}}
	}
	seen := map[string]bool{}
	for i := range p.ClusterAffinities {
		t := &p.ClusterAffinities[i]
		if t.AffinityName == "" || seen[t.AffinityName] {
			return nil, fmt.Errorf("%w: clusterAffinities[%d].affinityName must be set and unique", ErrInvalidPlacement, i)
		}
		seen[t.AffinityName] = true
		aff, err := compileAffinity(&t.ClusterAffinity, affinityPath{term: t.AffinityName})
		if err != nil {
			return nil, err
		}
		c.terms = append(c.terms, term{name: t.AffinityName, aff: aff})
	}

	if c.strat == staticWeight && p.ReplicaScheduling.WeightPreference != nil {
		for i := range p.ReplicaScheduling.WeightPreference.StaticWeightList {
			w := &p.ReplicaScheduling.WeightPreference.StaticWeightList[i]
			if w.Weight < 1 {
				return nil, fmt.Errorf("%w: replicaScheduling.weightPreference.staticWeightList[%d].weight must be at least 1", ErrInvalidPlacement, i)
			}
			aff, err := compileAffinity(&w.TargetCluster, affinityPath{static: i + 1})
			if err != nil {
				return nil, err
			}
			c.statics = append(c.statics, staticRule{target: aff, weight: w.Weight})
		}
		// A cluster takes the highest weight of the entries matching it: with the heaviest entries
		// first, the first match is that weight and the rest need not be tried.
		slices.SortStableFunc(c.statics, func(a, b staticRule) int { return cmp.Compare(b.weight, a.weight) })
		c.byLabel = staticsByLabel(c.statics)
	}
	return c, nil
}

// labelWeights gives clusters the weight of their value of one label: weights[i] to values[i],
// the first match counting.
type labelWeights struct {
	key     string
	values  []string
	weights []int64
}

// staticsByLabel returns the rules as labelWeights when each selects clusters only by values of
// one and the same label (tier in gold, tier in silver), the usual staticWeightList; nil
// otherwise. A cluster's weight then takes one label lookup, however many rules there are.
func staticsByLabel(rules []staticRule) *labelWeights {
	lw := &labelWeights{}
	for i, rule := range rules { // heaviest first, so the first value that matches has the weight
		a := rule.target
		if !a.names.empty() || !a.exclude.empty() || len(a.fields) != 0 || len(a.labels) != 1 {
			return nil
		}
		r := &a.labels[0]
		if r.op != opIn || (i > 0 && r.key != lw.key) {
			return nil
		}
		lw.key = r.key
		for _, v := range r.values {
			lw.values = append(lw.values, v)
			lw.weights = append(lw.weights, rule.weight)
		}
	}
	return lw
}

func checkReplicaScheduling(rs *policyv1alpha1.ReplicaSchedulingStrategy) error {
	if rs == nil {
		return nil
	}
	switch rs.ReplicaSchedulingType {
	case "", policyv1alpha1.ReplicaSchedulingTypeDivided, policyv1alpha1.ReplicaSchedulingTypeDuplicated:
	default:
		return fmt.Errorf("%w: replicaScheduling.replicaSchedulingType %q is not supported: use Duplicated or Divided", ErrInvalidPlacement, rs.ReplicaSchedulingType)
	}
	switch rs.ReplicaDivisionPreference {
	case "", policyv1alpha1.ReplicaDivisionPreferenceWeighted, policyv1alpha1.ReplicaDivisionPreferenceAggregated:
	default:
		return fmt.Errorf("%w: replicaScheduling.replicaDivisionPreference %q is not supported: use Weighted or Aggregated", ErrInvalidPlacement, rs.ReplicaDivisionPreference)
	}
	if wp := rs.WeightPreference; wp != nil {
		switch wp.DynamicWeight {
		case "", policyv1alpha1.DynamicWeightByAvailableReplicas:
		default:
			return fmt.Errorf("%w: replicaScheduling.weightPreference.dynamicWeight %q is not supported: use AvailableReplicas", ErrInvalidPlacement, wp.DynamicWeight)
		}
	}
	return nil
}

func checkTolerations(ts []corev1.Toleration) error {
	for i, t := range ts {
		switch t.Operator {
		case "", corev1.TolerationOpEqual, corev1.TolerationOpExists:
		default:
			return fmt.Errorf("%w: clusterTolerations[%d].operator %q is not supported: use Equal or Exists", ErrInvalidPlacement, i, t.Operator)
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("%w: clusterTolerations[%d].effect %q is not supported: use NoSchedule or NoExecute", ErrInvalidPlacement, i, t.Effect)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			return fmt.Errorf("%w: clusterTolerations[%d]: an empty key needs operator Exists", ErrInvalidPlacement, i)
		}
	}
	return nil
}
