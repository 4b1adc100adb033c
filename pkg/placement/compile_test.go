package placement

import (
	"math/rand/v2"
	"strings"
	"testing"

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
