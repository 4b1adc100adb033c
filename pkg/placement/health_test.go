package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestTaintText: messages name taints as corev1.Taint.ToString does.
func TestTaintText(t *testing.T) {
	for _, key := range []string{"k", "dbfleet.io/unreachable"} {
		for _, value := range []string{"", "v"} {
			for _, effect := range []corev1.TaintEffect{"", corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
				taint := corev1.Taint{Key: key, Value: value, Effect: effect}
				if got, want := taintText(&taint), taint.ToString(); got != want {
					t.Errorf("taintText(%+v) = %q, want %q", taint, got, want)
				}
			}
		}
	}
}
