package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func runPlan(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewHubCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"plan"}, args...))
	err := cmd.Execute()
	return out.String(), err
}

func sample(name string) string {
	return filepath.Join("..", "..", "..", "deploy", "samples", "plan", name)
}

// TestPlanReproducesKarmadaExamples checks Karmada's documented divisions through `hub plan -o json`.
func TestPlanReproducesKarmadaExamples(t *testing.T) {
	for _, tc := range []struct {
		file string
		want map[string]int32
	}{
		{"static-weights.yaml", map[string]int32{"member1": 6, "member2": 4, "member3": 2}},
		{"dynamic-weights.yaml", map[string]int32{"member1": 2, "member2": 4, "member3": 6}},
		{"aggregated.yaml", map[string]int32{"member2": 5, "member3": 7}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out, err := runPlan(t, "-f", sample(tc.file), "-o", "json")
			if err != nil {
				t.Fatalf("hub plan: %v\n%s", err, out)
			}
			var list struct {
				Items []dbfleetv1alpha1.DatabaseCluster `json:"items"`
			}
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Fatalf("output is not a JSON List: %v\n%s", err, out)
			}
			if len(list.Items) != 1 {
				t.Fatalf("%d items, want 1", len(list.Items))
			}
			dbc := list.Items[0]
			got := map[string]int32{}
			for _, p := range dbc.Status.Placements {
				got[p.Cluster] = p.Replicas
			}
			if len(got) != len(tc.want) {
				t.Errorf("shares %v, want %v", got, tc.want)
			}
			for c, n := range tc.want {
				if got[c] != n {
					t.Errorf("shares %v, want %v", got, tc.want)
					break
				}
			}
			if dbc.Status.Primary == nil || dbc.Status.Primary.Epoch != 1 || dbc.Kind != "DatabaseCluster" {
				t.Errorf("status.primary = %+v, kind %q: want the object as the hub writes it", dbc.Status.Primary, dbc.Kind)
			}
			if len(dbc.Status.Conditions) == 0 || dbc.Status.Conditions[0].Type != dbfleetv1alpha1.ConditionScheduled {
				t.Errorf("conditions %+v, want Scheduled", dbc.Status.Conditions)
			}
		})
	}
}

func TestPlanTableExplainsExclusions(t *testing.T) {
	out, err := runPlan(t, "-f", sample("fleet.yaml"))
	if err != nil {
		t.Fatalf("hub plan: %v\n%s", err, out)
	}
	for _, want := range []string{
		"DatabaseCluster shop/orders: 5 replicas, policy PropagationPolicy shop/production",
		"primary (epoch 1)",
		"lab         excluded by clusterAffinity",
		"south       unreachable (dbfleet.io/unreachable)",
		"DatabaseCluster shop/reports: 2 replicas, policy ClusterPropagationPolicy default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plan output lacks %q:\n%s", want, out)
		}
	}
}

func TestPlanFailsWhenUnschedulable(t *testing.T) {
	path := writeFile(t, `apiVersion: dbfleet.io/v1alpha1
kind: MemberCluster
metadata: {name: east}
spec:
  taints: [{key: dedicated, effect: NoSchedule}]
---
apiVersion: dbfleet.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: all}
spec:
  resourceSelectors: [{}]
  placement: {}
---
apiVersion: dbfleet.io/v1alpha1
kind: DatabaseCluster
metadata: {name: orders, namespace: shop}
spec: {engine: postgres, version: "16", replicas: 1, storage: {size: 1Gi}}
`)
	out, err := runPlan(t, "-f", path)
	if err == nil || !strings.Contains(err.Error(), "1 of 1 DatabaseClusters are not schedulable") {
		t.Fatalf("err = %v, want a non-zero exit for an unschedulable database\n%s", err, out)
	}
	if !strings.Contains(out, "0/1 clusters fit") {
		t.Errorf("output does not explain why:\n%s", out)
	}
}

func TestPlanRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"unknown kind", "apiVersion: dbfleet.io/v1alpha1\nkind: Database\nmetadata: {name: x}\n",
			[]string{"document 1", `kind "Database"`}},
		{"bad YAML", "apiVersion: dbfleet.io/v1alpha1\nkind: [\n", []string{"document 1"}},
		{"unknown field", "---\n# first\n---\napiVersion: dbfleet.io/v1alpha1\nkind: DatabaseCluster\nmetadata: {name: x}\nspec: {engine: postgres, version: '1', replicaz: 3, storage: {size: 1Gi}}\n",
			[]string{"document 2", `unknown field "spec.replicaz"`}},
		{"unsupported placement field", "apiVersion: dbfleet.io/v1alpha1\nkind: ClusterPropagationPolicy\nmetadata: {name: p}\nspec:\n  resourceSelectors: [{}]\n  placement:\n    spreadConstraints: [{spreadByLabel: rack}]\n",
			[]string{"document 1", "ClusterPropagationPolicy p", "spec.placement", "spreadByLabel"}},
		{"wrong apiVersion", "apiVersion: policy.karmada.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p}\n",
			[]string{"document 1", `apiVersion "policy.karmada.io/v1alpha1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.doc)
			_, err := runPlan(t, "-f", path)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range append(tc.want, path) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPlanSummarisesExclusionsUnlessAsked: on a large fleet the clusters not chosen are counted by
// reason; --show-all-exclusions lists each one.
func TestPlanSummarisesExclusionsUnlessAsked(t *testing.T) {
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "apiVersion: dbfleet.io/v1alpha1\nkind: MemberCluster\nmetadata: {name: lab-%02d}\nspec: {}\n---\n", i)
	}
	b.WriteString(`apiVersion: dbfleet.io/v1alpha1
kind: MemberCluster
metadata: {name: east}
spec: {}
---
apiVersion: dbfleet.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: all}
spec:
  resourceSelectors: [{}]
  placement: {clusterAffinity: {clusterNames: [east]}}
---
apiVersion: dbfleet.io/v1alpha1
kind: DatabaseCluster
metadata: {name: orders, namespace: shop}
spec: {engine: postgres, version: "16", replicas: 1, storage: {size: 1Gi}}
`)
	path := writeFile(t, b.String())
	out, err := runPlan(t, "-f", path)
	if err != nil {
		t.Fatalf("hub plan: %v\n%s", err, out)
	}
	if !strings.Contains(out, "30 clusters  excluded by clusterAffinity: lab-00, lab-01, lab-02 and 27 more") || strings.Contains(out, "lab-29") {
		t.Errorf("want a summary by reason:\n%s", out)
	}
	out, err = runPlan(t, "-f", path, "--show-all-exclusions")
	if err != nil {
		t.Fatalf("hub plan --show-all-exclusions: %v\n%s", err, out)
	}
	if !strings.Contains(out, "lab-29      excluded by clusterAffinity") {
		t.Errorf("want every cluster listed:\n%s", out)
	}
}
