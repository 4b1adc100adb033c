package placement

import (
	"math/rand/v2"
	"strings"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPlainSelectorsAreValid: compile skips apimachinery's validation for plain selectors, so
// every selector plainSelector accepts must be one apimachinery accepts.
func TestPlainSelectorsAreValid(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	const alphabet = "aZ09-_./ :"
	word := func() string {
		var b strings.Builder
		n := r.IntN(6)
		if r.IntN(10) == 0 {
			n = 60 + r.IntN(8) // around the 63-character limit
		}
		for range n {
			if r.IntN(n) == 0 { // mostly letters, so that long plain words are drawn too
				b.WriteByte(alphabet[r.IntN(len(alphabet))])
			} else {
				b.WriteByte('a')
			}
		}
		return b.String()
	}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn,
		metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, "Gt", ""}
	plain := 0
	for range 200000 {
		sel := &metav1.LabelSelector{}
		if r.IntN(2) == 0 {
			sel.MatchLabels = map[string]string{word(): word()}
		}
		for range r.IntN(3) {
			e := metav1.LabelSelectorRequirement{Key: word(), Operator: ops[r.IntN(len(ops))]}
			for range r.IntN(3) {
				e.Values = append(e.Values, word())
			}
			sel.MatchExpressions = append(sel.MatchExpressions, e)
		}
		if plainSelector(sel) {
			plain++
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				t.Fatalf("plainSelector accepts %+v, which apimachinery rejects: %v", sel, err)
			}
		}
	}
	if plain < 1000 {
		t.Fatalf("only %d plain selectors drawn: the test checks too little", plain)
	}
}

// TestStaticsByLabel: the one-lookup form of a staticWeightList gives every cluster the weight
// the entries give it one by one.
func TestStaticsByLabel(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	pick := func(options ...string) string { return options[r.IntN(len(options))] }
	byLabel := 0
	for range 3000 {
		p := staticPlacement(nil)
		p.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{}
		for range 1 + r.IntN(4) {
			var target policyv1alpha1.ClusterAffinity
			switch r.IntN(8) {
			case 0:
				target.ClusterNames = []string{pick("c0", "c1")}
			case 1:
				target.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{pick("a", "b")}}}}
			case 2:
				target.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{pick("tier", "env"): pick("a", "b", "c")}}
			default:
				target.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{pick("a", "b"), pick("b", "c")}}}}
			}
			p.ReplicaScheduling.WeightPreference.StaticWeightList = append(p.ReplicaScheduling.WeightPreference.StaticWeightList,
				policyv1alpha1.StaticClusterWeight{TargetCluster: target, Weight: int64(1 + r.IntN(3))})
		}
		c, err := compile(&p, DefaultTolerationSeconds)
		if err != nil {
			t.Fatal(err)
		}
		if c.byLabel == nil {
			continue
		}
		byLabel++
		generic := *c
		generic.byLabel = nil
		for i := range 4 {
			cluster := Cluster{Name: "c" + string(rune('0'+i)), Labels: map[string]string{}}
			if r.IntN(4) > 0 {
				cluster.Labels["tier"] = pick("a", "b", "c", "d")
			}
			want := (&scheduler{compiled: &generic}).staticWeight(&cluster)
			if got := (&scheduler{compiled: c}).staticWeight(&cluster); got != want {
				t.Fatalf("weight of %v under %+v: %d by one lookup, %d entry by entry", cluster.Labels,
					p.ReplicaScheduling.WeightPreference.StaticWeightList, got, want)
			}
		}
	}
	if byLabel < 300 {
		t.Fatalf("only %d lists took the one-lookup form: the test checks too little", byLabel)
	}
}
