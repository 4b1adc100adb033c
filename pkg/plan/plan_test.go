package plan

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// fleetOf builds a fleet in code: one DatabaseCluster shop/orders, one PropagationPolicy for it
// with the given placement, and MemberClusters with the given names, all assumed Ready.
func fleetOf(replicas int32, p policyv1alpha1.Placement, members ...string) *Fleet {
	f := &Fleet{
		Databases: []dbfleetv1alpha1.DatabaseCluster{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 1},
			Spec: dbfleetv1alpha1.DatabaseClusterSpec{
				DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres, Version: "16"},
				Replicas:         replicas,
			},
		}},
		Policies: []dbfleetv1alpha1.PropagationPolicy{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "production", Generation: 1},
			Spec: dbfleetv1alpha1.PropagationSpec{
				ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{Name: "orders"}},
				Placement:         p,
			},
		}},
	}
	f.Databases[0].Spec.Storage.Size.Set(1 << 30)
	for _, m := range members {
		f.Members = append(f.Members, dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: m}})
	}
	f.AssumeReady()
	return f
}

// TestCheckStatusRefusesAnEpochThatWraps: a primary that must move at the largest epoch would be
// written with a negative epoch, which agents would take for the oldest; the API server refuses
// it, and so does the plan, naming the field.
func TestCheckStatusRefusesAnEpochThatWraps(t *testing.T) {
	f := fleetOf(1, policyv1alpha1.Placement{}, "east")
	f.Databases[0].Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "gone", Epoch: math.MaxInt64}
	results := Run(f, time.Now())
	if err := CheckStatus(context.Background(), results); err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r.Schedulable() {
		t.Fatalf("schedulable with status.primary %+v, want refused", r.Database.Status.Primary)
	}
	if len(r.Refused) != 1 || r.Refused[0].Field != "status.primary.epoch" || !strings.Contains(r.Refused[0].Error(), "greater than or equal to 1") {
		t.Fatalf("refused %v, want status.primary.epoch below its minimum", r.Refused)
	}
	var out bytes.Buffer
	if err := PrintTable(&out, results, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "the API server would refuse the status the hub would write: status.primary.epoch") {
		t.Errorf("the table does not say why:\n%s", out.String())
	}

	// One below the largest epoch moves as usual.
	f.Databases[0].Status.Primary.Epoch = math.MaxInt64 - 1
	results = Run(f, time.Now())
	if err := CheckStatus(context.Background(), results); err != nil {
		t.Fatal(err)
	}
	if !results[0].Schedulable() || results[0].Database.Status.Primary.Epoch != math.MaxInt64 {
		t.Fatalf("refused %v, primary %+v: want epoch MaxInt64 accepted", results[0].Refused, results[0].Database.Status.Primary)
	}
}

// TestPrintTableSummarisesExclusions: past MaxListedExclusions the clusters not chosen are
// summarised by reason, largest group first, with a few names; the option lists every one.
func TestPrintTableSummarisesExclusions(t *testing.T) {
	var members []string
	for i := range 40 {
		members = append(members, fmt.Sprintf("lab-%02d", i))
	}
	members = append(members, "east", "west")
	f := fleetOf(2, policyv1alpha1.Placement{
		ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: []string{"east", "west", "lab-00"}},
	}, members...)
	// lab-00 is in the affinity but unreachable: a second reason.
	for i := range f.Members {
		if f.Members[i].Name == "lab-00" {
			f.Members[i].Spec.Taints = []corev1.Taint{{Key: dbfleetv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	results := Run(f, time.Now())
	if !results[0].Schedulable() || len(results[0].Excluded) != 40 {
		t.Fatalf("outcome %+v, %d excluded: want 2 shares and 40 clusters not chosen", results[0].Outcome, len(results[0].Excluded))
	}

	var out bytes.Buffer
	if err := PrintTable(&out, results, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	for _, want := range []string{
		"39 clusters  excluded by clusterAffinity: lab-01, lab-02, lab-03 and 36 more\n",
		"1 cluster    unreachable (dbfleet.io/unreachable): lab-00\n",
		"(40 clusters not chosen, summarised by reason: --show-all-exclusions lists each)",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("summary lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "lab-39") {
		t.Errorf("summary lists every cluster:\n%s", table)
	}

	out.Reset()
	if err := PrintTable(&out, results, TableOptions{ShowAllExclusions: true}); err != nil {
		t.Fatal(err)
	}
	for _, m := range members[:40] {
		if !strings.Contains(out.String(), "  "+m+" ") {
			t.Errorf("full list lacks %s:\n%s", m, out.String())
		}
	}
}

// TestPlanPlacesNothingInAReservedNamespace: as the hub, the plan places no DatabaseCluster of
// kube-system (its pods would run in every member's kube-system) and says why.
func TestPlanPlacesNothingInAReservedNamespace(t *testing.T) {
	f := fleetOf(2, policyv1alpha1.Placement{}, "east", "west")
	f.Databases[0].Namespace = "kube-system"
	f.Policies[0].Namespace = "kube-system"
	results := Run(f, time.Now())
	if results[0].Schedulable() || len(results[0].Database.Status.Placements) != 0 {
		t.Fatalf("placements %+v: want none in kube-system", results[0].Database.Status.Placements)
	}
	var out bytes.Buffer
	if err := PrintTable(&out, results, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "ReservedNamespace: namespace kube-system may hold no database (namespaces kube-* belong to Kubernetes)"; !strings.Contains(out.String(), want) {
		t.Errorf("plan lacks %q:\n%s", want, out.String())
	}
}
