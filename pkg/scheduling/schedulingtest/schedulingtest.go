// Package schedulingtest builds the small fleets, policies and databases that the scheduling
// and databasecluster unit tests place.
package schedulingtest

import (
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// T0 is the tests' fixed start time.
var T0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Fleet builds Ready MemberClusters with unlimited room (the test databases request nothing).
func Fleet(names ...string) map[string]*dbfleetv1alpha1.MemberCluster {
	out := map[string]*dbfleetv1alpha1.MemberCluster{}
	for _, n := range names {
		mc := &dbfleetv1alpha1.MemberCluster{}
		mc.Name = n
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Test"})
		out[n] = mc
	}
	return out
}

// UnreachableSince marks a cluster Ready=Unknown and tainted unreachable since the given time.
func UnreachableSince(mc *dbfleetv1alpha1.MemberCluster, since time.Time) {
	meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: "Test"})
	added := metav1.NewTime(since)
	mc.Spec.Taints = []corev1.Taint{{Key: dbfleetv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &added}}
}

// StaticPolicy is one namespaced PropagationPolicy selecting everything and dividing by the
// given static weights.
func StaticPolicy(weights map[string]int64, failover *dbfleetv1alpha1.FailoverBehavior) []dbfleetv1alpha1.PropagationPolicy {
	pp := dbfleetv1alpha1.PropagationPolicy{}
	pp.Name, pp.Namespace, pp.Generation = "p", "ns", 1
	pp.Spec.ResourceSelectors = []dbfleetv1alpha1.ResourceSelector{{}}
	wp := &policyv1alpha1.ClusterPreferences{}
	for c, w := range weights {
		wp.StaticWeightList = append(wp.StaticWeightList, policyv1alpha1.StaticClusterWeight{
			TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: w})
	}
	pp.Spec.Placement.ReplicaScheduling = &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference:          wp,
	}
	pp.Spec.Failover = failover
	return []dbfleetv1alpha1.PropagationPolicy{pp}
}

// NewDB is a DatabaseCluster ns/db with the given replicas and no other spec.
func NewDB(replicas int32) *dbfleetv1alpha1.DatabaseCluster {
	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	dbc.Name, dbc.Namespace, dbc.Generation = "db", "ns", 1
	dbc.Spec.Replicas = replicas
	return dbc
}
