package agent

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/heartbeat"
)

func TestHeartbeatRenewsLeaseAndReportsCluster(t *testing.T) {
	ctx := context.Background()
	const name = "hb-east"
	mc := &dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: dbfleetv1alpha1.MemberClusterSpec{Region: "us-east"}}
	if err := hub.Client.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dbfleetv1alpha1.MemberNamespace(name)}}); err != nil {
		t.Fatal(err)
	}
	// Two Ready nodes with 4 CPUs each, one cordoned node that must not count, and a pod
	// requesting 1500m on a counted node.
	for _, n := range []struct {
		name          string
		unschedulable bool
	}{{"node-a", false}, {"node-b", false}, {"node-cordoned", true}} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}, Spec: corev1.NodeSpec{Unschedulable: n.unschedulable}}
		if err := east.Client.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		node.Status = corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		}
		if err := east.Client.Status().Update(ctx, node); err != nil {
			t.Fatal(err)
		}
	}
	if err := east.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hb"}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "hb", Name: "p"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}}}},
	}
	if err := east.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}

	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	disco, err := discovery.NewDiscoveryClientForConfig(east.Config)
	if err != nil {
		t.Fatal(err)
	}
	hb := &heartbeat.Heartbeat{
		Cluster: name, Hub: hub.Client, Member: east.Client, MemberDiscovery: disco,
		Interval: 5 * time.Second, FenceAfter: 15 * time.Second, AgentVersion: "test", Clock: clock,
	}
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{}
	leaseKey := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(name), Name: dbfleetv1alpha1.AgentLeaseName}
	if err := hub.Client.Get(ctx, leaseKey, lease); err != nil {
		t.Fatal(err)
	}
	if !lease.Spec.RenewTime.Time.Equal(clock.Now()) || *lease.Spec.LeaseDurationSeconds != 15 || *lease.Spec.HolderIdentity != name {
		t.Errorf("lease %+v", lease.Spec)
	}

	got := &dbfleetv1alpha1.MemberClusterReport{}
	reportKey := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(name), Name: name}
	if err := hub.Client.Get(ctx, reportKey, got); err != nil {
		t.Fatalf("the agent wrote no MemberClusterReport: %v", err)
	}
	st := got.Status
	if !meta.IsStatusConditionTrue(st.Conditions, dbfleetv1alpha1.ConditionReady) {
		t.Errorf("conditions %+v, want Ready", st.Conditions)
	}
	if st.KubernetesVersion != "v1.35.4" || st.Agent == nil || st.Agent.HeartbeatIntervalSeconds != 5 || st.Agent.FenceAfterSeconds != 15 {
		t.Errorf("version %q, agent %+v", st.KubernetesVersion, st.Agent)
	}
	alloc, used := st.ResourceSummary.Allocatable[corev1.ResourceCPU], st.ResourceSummary.Allocated[corev1.ResourceCPU]
	if alloc.Cmp(resource.MustParse("8")) != 0 || used.Cmp(resource.MustParse("1500m")) != 0 {
		t.Errorf("resource summary cpu allocatable %s allocated %s, want 8 and 1500m", alloc.String(), used.String())
	}
	mcNow := &dbfleetv1alpha1.MemberCluster{}
	if err := hub.Client.Get(ctx, client.ObjectKey{Name: name}, mcNow); err != nil {
		t.Fatal(err)
	}
	if mcNow.ResourceVersion != mc.ResourceVersion {
		t.Error("the agent wrote its MemberCluster; it reports only through its MemberClusterReport")
	}

	// The next beat renews the lease but writes no report: nothing changed.
	rv := got.ResourceVersion
	clock.Step(5 * time.Second)
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hub.Client.Get(ctx, leaseKey, lease); err != nil {
		t.Fatal(err)
	}
	if !lease.Spec.RenewTime.Time.Equal(clock.Now()) {
		t.Errorf("lease renewTime %s, want %s", lease.Spec.RenewTime, clock.Now())
	}
	if err := hub.Client.Get(ctx, reportKey, got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != rv {
		t.Errorf("MemberClusterReport written although nothing changed")
	}
}
