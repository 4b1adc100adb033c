package placement

import (
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
)

// strategy is how replicas are divided, resolved from replicaScheduling the way Karmada does.
type strategy uint8

const (
	// duplicated: every chosen cluster runs all replicas.
	duplicated strategy = iota
	// staticWeight: Divided by fixed weights (staticWeightList, or equal weights).
	staticWeight
	// dynamicWeight: Divided in proportion to each cluster's available replicas.
	dynamicWeight
	// aggregated: Divided over as few clusters as possible, respecting available replicas.
	aggregated
)

func (s strategy) String() string {
	switch s {
	case duplicated:
		return "Duplicated"
	case staticWeight:
		return "StaticWeight"
	case dynamicWeight:
		return "DynamicWeight"
	default:
		return "Aggregated"
	}
}

// capacityBound says whether the strategy caps shares by available replicas. Karmada's
// Duplicated and static-weight division ignore capacity.
func (s strategy) capacityBound() bool { return s == dynamicWeight || s == aggregated }

// resolveStrategy follows Karmada: no replicaScheduling means Duplicated, an empty type means
// Divided (the API default) and an empty division preference means Weighted (Karmada's webhook
// default); Weighted without dynamicWeight is static, with equal weights when none are listed.
func resolveStrategy(p *policyv1alpha1.Placement) strategy {
	rs := p.ReplicaScheduling
	if rs == nil || rs.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
		return duplicated
	}
	if rs.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated {
		return aggregated
	}
	if rs.WeightPreference != nil && rs.WeightPreference.DynamicWeight != "" {
		return dynamicWeight
	}
	return staticWeight
}

// spreadIgnored mirrors Karmada's shouldIgnoreSpreadConstraint: with static weights the weights
// decide where replicas go, so spreadConstraints only filter clusters lacking the spread field
// and never select clusters.
func spreadIgnored(p *policyv1alpha1.Placement) bool {
	rs := p.ReplicaScheduling
	if rs == nil || rs.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
		return false
	}
	if rs.ReplicaDivisionPreference == policyv1alpha1.ReplicaDivisionPreferenceAggregated {
		return false
	}
	wp := rs.WeightPreference
	return wp == nil || (len(wp.StaticWeightList) != 0 && wp.DynamicWeight == "")
}
