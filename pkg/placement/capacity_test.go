package placement

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestAvailableReplicas(t *testing.T) {
	summary := &v1alpha1.ResourceSummary{
		Allocatable: list("cpu", "16", "memory", "64Gi", "pods", "110"),
		Allocated:   list("cpu", "10500m", "memory", "20Gi"),
	}
	tests := []struct {
		name        string
		summary     *v1alpha1.ResourceSummary
		requests    corev1.ResourceList
		want        int32
		wantLimited bool
	}{
		{name: "no requests: unlimited", summary: summary, requests: nil, want: 0, wantLimited: false},
		{name: "zero requests: unlimited", summary: summary, requests: list("cpu", "0"), want: 0, wantLimited: false},
		{name: "cpu bound, fractional", summary: summary, requests: list("cpu", "500m"), want: 11, wantLimited: true},
		{name: "memory bound", summary: summary, requests: list("cpu", "100m", "memory", "10Gi"), want: 4, wantLimited: true},
		{name: "nothing allocated of a resource", summary: summary, requests: list("pods", "1"), want: 110, wantLimited: true},
		{name: "a resource the cluster lacks", summary: summary, requests: list("nvidia.com/gpu", "1"), want: 0, wantLimited: true},
		{name: "overcommitted", summary: &v1alpha1.ResourceSummary{Allocatable: list("cpu", "1"), Allocated: list("cpu", "2")}, requests: list("cpu", "1"), want: 0, wantLimited: true},
		{name: "no summary reported yet", summary: nil, requests: list("cpu", "1"), want: 0, wantLimited: true},
		{name: "huge memory", summary: &v1alpha1.ResourceSummary{Allocatable: list("memory", "4Ei")}, requests: list("memory", "1Pi"), want: 4096, wantLimited: true},
		{name: "capped at int32", summary: &v1alpha1.ResourceSummary{Allocatable: list("pods", "1T")}, requests: list("pods", "1"), want: 1<<31 - 1, wantLimited: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, limited := AvailableReplicas(tt.summary, tt.requests)
			if got != tt.want || limited != tt.wantLimited {
				t.Errorf("AvailableReplicas = %d, %v; want %d, %v", got, limited, tt.want, tt.wantLimited)
			}
		})
	}
}

func TestClusterFromMember(t *testing.T) {
	mc := &v1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{"env": "prod"}},
		Spec: v1alpha1.MemberClusterSpec{Region: "us-east", Zone: "us-east-1a", Provider: "aws",
			Taints: []corev1.Taint{{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}}},
		Status: v1alpha1.MemberClusterStatus{
			Conditions:      []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}},
			ResourceSummary: &v1alpha1.ResourceSummary{Allocatable: list("cpu", "8"), Allocated: list("cpu", "2")},
		},
	}
	db := &v1alpha1.DatabaseTemplate{Resources: corev1.ResourceRequirements{Limits: list("cpu", "2", "memory", "1Gi"), Requests: list("cpu", "1")}}
	req := Requests(db)
	if req.Cpu().String() != "1" || req.Memory().String() != "1Gi" {
		t.Errorf("Requests = %v, want cpu 1 (the request) and memory 1Gi (the limit)", req)
	}
	c := ClusterFromMember(mc, req)
	if c.Name != "east" || c.Region != "us-east" || c.Zone != "us-east-1a" || c.Provider != "aws" || !c.Ready ||
		c.AvailableReplicas != 0 || c.Unlimited || len(c.Taints) != 1 || c.Labels["env"] != "prod" {
		t.Errorf("ClusterFromMember = %+v (memory is requested but not reported, so nothing fits)", c)
	}
	c = ClusterFromMember(mc, list("cpu", "1"))
	if c.AvailableReplicas != 6 {
		t.Errorf("AvailableReplicas = %d, want 6", c.AvailableReplicas)
	}
	mc.Status.Conditions[0].Status = metav1.ConditionUnknown
	if ClusterFromMember(mc, nil).Ready || !ClusterFromMember(mc, nil).Unlimited {
		t.Error("Ready=Unknown must read as not ready, and no requests as unlimited")
	}
}

func TestStatusRoundTrip(t *testing.T) {
	d := mustSchedule(t, Input{Replicas: 5, Clusters: []Cluster{ready("a", 9), ready("b", 9)}, Placement: dynamicPlacement(), PreferredPrimaries: []string{"b"}})
	st := v1alpha1.DatabaseClusterStatus{Placements: d.Placements(), Primary: &v1alpha1.PrimaryStatus{Cluster: d.Primary}}
	if st.Placements[1].Role != v1alpha1.RolePrimary || st.Placements[0].Role != v1alpha1.RoleReplica {
		t.Errorf("roles = %+v", st.Placements)
	}
	prev := PreviousFromStatus(&st)
	if sharesAndPrimary(*prev) != sharesAndPrimary(d) {
		t.Errorf("round trip: %s vs %s", sharesAndPrimary(*prev), sharesAndPrimary(d))
	}
	if PreviousFromStatus(&v1alpha1.DatabaseClusterStatus{}) != nil {
		t.Error("an empty status has no previous decision")
	}
}
