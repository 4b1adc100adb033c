package scheduling

import (
	"os/exec"
	"strings"
	"testing"
)

// Scheduling, and `hub plan` which runs it offline, must not pull in a reconciler or metrics:
// counting there counted every held-back pass and every `hub plan` run as evictions.
func TestSchedulingAndPlanImportNoReconcilerOrMetrics(t *testing.T) {
	for _, pkg := range []string{"github.com/dbfleet/dbfleet/pkg/scheduling", "github.com/dbfleet/dbfleet/pkg/plan"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/dbfleet/dbfleet/pkg/hub") ||
				strings.HasPrefix(dep, "github.com/prometheus/client_golang") ||
				dep == "sigs.k8s.io/controller-runtime/pkg/metrics" {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
