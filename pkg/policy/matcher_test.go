package policy

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func labelled(key, value string) dbfleetv1alpha1.ResourceSelector {
	return dbfleetv1alpha1.ResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}
}

func withUID(p dbfleetv1alpha1.ClusterPropagationPolicy, uid string, generation int64) dbfleetv1alpha1.ClusterPropagationPolicy {
	p.UID, p.Generation = types.UID(uid), generation
	return p
}

func selectedName(m *Match) string {
	if m == nil {
		return ""
	}
	return m.Ref.Name
}

func TestMatcherSelectsLikeSelect(t *testing.T) {
	orders := dbc("shop", "orders", map[string]string{"tier": "critical", "team": "payments"})
	cpps := []dbfleetv1alpha1.ClusterPropagationPolicy{
		withUID(cpp("batch", nil, labelled("tier", "batch")), "u1", 1),
		withUID(cpp("payments", nil, labelled("team", "payments")), "u2", 1),
		// A key labels cannot parse selects nothing, cached or not.
		withUID(cpp("broken", nil, labelled("not a key!", "x")), "u3", 1),
		withUID(cpp("everyone", nil, everyone), "u4", 1),
	}
	var m Matcher
	for round := range 3 { // the first round parses, the others read the cache
		if got, want := selectedName(m.Select(orders, nil, cpps)), selectedName(Select(orders, nil, cpps)); got != want || got != "payments" {
			t.Fatalf("round %d: Matcher.Select() = %q, Select() = %q, want both %q", round, got, want, "payments")
		}
	}
}

func TestMatcherFollowsTheGeneration(t *testing.T) {
	orders := dbc("shop", "orders", map[string]string{"tier": "critical"})
	var m Matcher
	v1 := withUID(cpp("critical", nil, labelled("tier", "critical")), "u1", 1)
	if got := selectedName(m.Select(orders, nil, []dbfleetv1alpha1.ClusterPropagationPolicy{v1})); got != "critical" {
		t.Fatalf("generation 1 selects %q, want critical", got)
	}
	v2 := withUID(cpp("critical", nil, labelled("tier", "gold")), "u1", 2)
	if got := selectedName(m.Select(orders, nil, []dbfleetv1alpha1.ClusterPropagationPolicy{v2})); got != "" {
		t.Fatalf("generation 2 no longer selects tier=critical, but Select() = %q (a stale parsed selector)", got)
	}
}

func TestMatcherForgetsPoliciesNoLongerListed(t *testing.T) {
	orders := dbc("shop", "orders", nil)
	var m Matcher
	gone := withUID(cpp("gone", nil, labelled("tier", "critical")), "gone", 1)
	m.Select(orders, nil, []dbfleetv1alpha1.ClusterPropagationPolicy{gone})
	stays := []dbfleetv1alpha1.ClusterPropagationPolicy{withUID(cpp("stays", nil, labelled("tier", "critical")), "stays", 1)}
	for range 2 * sweepEvery {
		m.Select(orders, nil, stays)
	}
	_, inCurrent := m.current["gone"]
	_, inPrevious := m.previous["gone"]
	if inCurrent || inPrevious {
		t.Errorf("a policy unused for %d calls is still cached", 2*sweepEvery)
	}
	if _, ok := m.current["stays"]; !ok {
		t.Error("a policy used on every call was dropped")
	}
}

// benchPolicies is the scale benchmark's mix: 400 ClusterPropagationPolicies selecting by label.
func benchPolicies() []dbfleetv1alpha1.ClusterPropagationPolicy {
	cpps := make([]dbfleetv1alpha1.ClusterPropagationPolicy, 400)
	for i := range cpps {
		cpps[i] = withUID(cpp(fmt.Sprintf("p-%d", i), nil, dbfleetv1alpha1.ResourceSelector{LabelSelector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{"bench.dbfleet.io/group": fmt.Sprint(i / 4)},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "bench.dbfleet.io/kind", Operator: metav1.LabelSelectorOpIn, Values: []string{fmt.Sprint(i % 4)}}},
		}}), fmt.Sprintf("uid-%d", i), 1)
	}
	return cpps
}

func BenchmarkSelect(b *testing.B) {
	orders := dbc("shop", "orders", map[string]string{"bench.dbfleet.io/group": "57", "bench.dbfleet.io/kind": "2"})
	cpps := benchPolicies()
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if Select(orders, nil, cpps) == nil {
				b.Fatal("no policy selected")
			}
		}
	})
	b.Run("matcher", func(b *testing.B) {
		b.ReportAllocs()
		var m Matcher
		for b.Loop() {
			if m.Select(orders, nil, cpps) == nil {
				b.Fatal("no policy selected")
			}
		}
	})
}
