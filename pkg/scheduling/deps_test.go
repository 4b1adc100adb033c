package scheduling

import (
	"os/exec"
	"strings"
	"testing"
)

// Scheduling, and `hub plan` which runs it offline, must not pull in a reconciler or metrics:
// counting there counted every held-back pass and every `hub plan` run as evictions. (Prometheus
// itself may come in underneath: `hub plan`'s admission check links the API server's CEL
// libraries, whose component-base registers metrics of its own. What must not happen is a
// dbfleet package on the path that imports a metrics library, or any hub controller.)
func TestSchedulingAndPlanImportNoReconcilerOrMetrics(t *testing.T) {
	for _, pkg := range []string{"github.com/dbfleet/dbfleet/pkg/scheduling", "github.com/dbfleet/dbfleet/pkg/plan"} {
		out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			dep, imports := fields[0], fields[1:]
			if strings.HasPrefix(dep, "github.com/dbfleet/dbfleet/pkg/hub") || dep == "sigs.k8s.io/controller-runtime/pkg/metrics" {
				t.Errorf("%s depends on %s", pkg, dep)
			}
			if !strings.HasPrefix(dep, "github.com/dbfleet/dbfleet/") {
				continue
			}
			for _, imp := range imports {
				if strings.HasPrefix(imp, "github.com/prometheus/client_golang") {
					t.Errorf("%s depends on %s, which imports %s", pkg, dep, imp)
				}
			}
		}
	}
}
