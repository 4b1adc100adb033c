package policy

import (
	"k8s.io/apimachinery/pkg/labels"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Precision is how precisely a selector picked a DatabaseCluster; higher is more precise.
type Precision int

const (
	// NoMatch: the policy does not select the DatabaseCluster.
	NoMatch Precision = iota
	// MatchAll: a selector with neither name nor labelSelector.
	MatchAll
	// MatchLabels: a labelSelector matched.
	MatchLabels
	// MatchName: the name matched.
	MatchName
)

// Match is the policy a DatabaseCluster is bound to.
type Match struct {
	// Ref names the policy, for status.policy.
	Ref dbfleetv1alpha1.PolicyReference
	// Spec is the policy's spec.
	Spec *dbfleetv1alpha1.PropagationSpec
	// Priority is the policy's priority (0 when unset).
	Priority int32
	// Precision is the best of the policy's selectors for this DatabaseCluster.
	Precision Precision
}

// Select returns the winning policy for dbc, or nil when none selects it. PropagationPolicies in
// other namespaces than dbc's, and policies being deleted, are ignored.
func Select(dbc *dbfleetv1alpha1.DatabaseCluster, pps []dbfleetv1alpha1.PropagationPolicy, cpps []dbfleetv1alpha1.ClusterPropagationPolicy) *Match {
	return (*Matcher)(nil).Select(dbc, pps, cpps)
}

// Select is the package's Select, with the label selectors taken from m's cache; a nil m parses
// them on every call.
func (m *Matcher) Select(dbc *dbfleetv1alpha1.DatabaseCluster, pps []dbfleetv1alpha1.PropagationPolicy, cpps []dbfleetv1alpha1.ClusterPropagationPolicy) *Match {
	if m != nil { // one lock per call, not per policy
		m.mu.Lock()
		defer m.mu.Unlock()
		m.age()
	}
	var best Match // best.Precision is NoMatch until a policy selects dbc
	consider := func(c Match) {
		if c.Precision != NoMatch && (best.Precision == NoMatch || beats(&c, &best)) {
			best = c
		}
	}
	for i := range pps {
		pp := &pps[i]
		// A policy being deleted no longer binds anything, as in Karmada.
		if pp.Namespace != dbc.Namespace || !pp.DeletionTimestamp.IsZero() {
			continue
		}
		consider(Match{
			Ref:       dbfleetv1alpha1.PolicyReference{Kind: "PropagationPolicy", Namespace: pp.Namespace, Name: pp.Name, Generation: pp.Generation},
			Spec:      &pp.Spec,
			Priority:  priority(&pp.Spec),
			Precision: precision(m.selectors(&pp.ObjectMeta, &pp.Spec), &pp.Spec, dbc, false),
		})
	}
	for i := range cpps {
		cpp := &cpps[i]
		if !cpp.DeletionTimestamp.IsZero() {
			continue
		}
		consider(Match{
			Ref:       dbfleetv1alpha1.PolicyReference{Kind: "ClusterPropagationPolicy", Name: cpp.Name, Generation: cpp.Generation},
			Spec:      &cpp.Spec,
			Priority:  priority(&cpp.Spec),
			Precision: precision(m.selectors(&cpp.ObjectMeta, &cpp.Spec), &cpp.Spec, dbc, true),
		})
	}
	if best.Precision == NoMatch {
		return nil
	}
	return &best
}

// beats reports whether a wins over b.
func beats(a, b *Match) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.Precision != b.Precision {
		return a.Precision > b.Precision
	}
	aNamespaced, bNamespaced := a.Ref.Kind == "PropagationPolicy", b.Ref.Kind == "PropagationPolicy"
	if aNamespaced != bNamespaced {
		return aNamespaced
	}
	return a.Ref.Name < b.Ref.Name
}

func priority(spec *dbfleetv1alpha1.PropagationSpec) int32 {
	if spec.Priority == nil {
		return 0
	}
	return *spec.Priority
}

// precision is the best precision among the spec's selectors that select dbc. A
// ClusterPropagationPolicy selector's namespace, when set, must be dbc's. parsed holds the
// selectors' parsed labelSelectors, index for index.
func precision(parsed []labels.Selector, spec *dbfleetv1alpha1.PropagationSpec, dbc *dbfleetv1alpha1.DatabaseCluster, clusterScoped bool) Precision {
	best := NoMatch
	for i := range spec.ResourceSelectors {
		if p := selectorPrecision(parsed[i], &spec.ResourceSelectors[i], dbc, clusterScoped); p > best {
			best = p
		}
	}
	return best
}

func selectorPrecision(parsed labels.Selector, sel *dbfleetv1alpha1.ResourceSelector, dbc *dbfleetv1alpha1.DatabaseCluster, clusterScoped bool) Precision {
	if clusterScoped && sel.Namespace != "" && sel.Namespace != dbc.Namespace {
		return NoMatch
	}
	switch {
	case sel.Name != "":
		if sel.Name == dbc.Name {
			return MatchName
		}
		return NoMatch
	case sel.LabelSelector != nil:
		if !parsed.Matches(labels.Set(dbc.Labels)) {
			return NoMatch
		}
		return MatchLabels
	default:
		return MatchAll
	}
}
