package scale

import (
	"context"
	"fmt"
	"strconv"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// The workload: clusters form groups of groupSize (5 regions in each); each group has four
// ClusterPropagationPolicies, one per kind of placement, and the databases are dealt round-robin
// over groups and kinds, so every cluster carries about the same load.
const (
	groupSize    = 10
	regions      = 5
	labelGroup   = "bench.dbfleet.io/group"
	labelPolicy  = "bench.dbfleet.io/policy"
	namespaces   = 10
	benchNSLabel = "bench.dbfleet.io/namespace"
)

// Policy kinds.
const (
	kindDuplicated = "duplicated"
	kindStatic     = "static"
	kindDynamic    = "dynamic"
	kindAggregated = "aggregated"
)

var kinds = []string{kindDuplicated, kindStatic, kindDynamic, kindAggregated}

// replicasOf is each kind's DatabaseCluster replicas.
var replicasOf = map[string]int32{kindDuplicated: 1, kindStatic: 5, kindDynamic: 4, kindAggregated: 3}

func clusterName(i int) string { return fmt.Sprintf("c%04d", i) }

func groupOf(cluster int) int { return cluster / groupSize }

func groupName(g int) string { return "g" + strconv.Itoa(g) }

func regionOf(cluster int) string { return "region-" + strconv.Itoa(cluster%regions) }

func groups(clusters int) int { return (clusters + groupSize - 1) / groupSize }

func databaseNamespace(i int) string { return fmt.Sprintf("bench-%02d", i%namespaces) }

func databaseName(i int) string { return fmt.Sprintf("db-%05d", i) }

// policies returns the ClusterPropagationPolicies of group g, whose clusters are members.
func policies(g int, members []string) []*dbfleetv1alpha1.ClusterPropagationPolicy {
	groupAffinity := &policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{labelGroup: groupName(g)}}}
	selector := func(kind string) []dbfleetv1alpha1.ResourceSelector {
		return []dbfleetv1alpha1.ResourceSelector{{LabelSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{labelGroup: groupName(g), labelPolicy: kind}}}}
	}
	cpp := func(kind string, p policyv1alpha1.Placement) *dbfleetv1alpha1.ClusterPropagationPolicy {
		return &dbfleetv1alpha1.ClusterPropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%s-%s", groupName(g), kind)},
			Spec:       dbfleetv1alpha1.PropagationSpec{ResourceSelectors: selector(kind), Placement: p},
		}
	}
	n := min(len(members), 3)
	static := members[:min(len(members), 5)]
	weights := make([]policyv1alpha1.StaticClusterWeight, len(static))
	for i, c := range static {
		weights[i] = policyv1alpha1.StaticClusterWeight{
			TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{c}}, Weight: int64(i + 1)}
	}
	regionsInGroup := min(len(members), regions)
	return []*dbfleetv1alpha1.ClusterPropagationPolicy{
		cpp(kindDuplicated, policyv1alpha1.Placement{
			ClusterAffinity:   groupAffinity,
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: n, MaxGroups: n}},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated},
		}),
		cpp(kindStatic, policyv1alpha1.Placement{
			ClusterAffinity: &policyv1alpha1.ClusterAffinity{ClusterNames: static},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &policyv1alpha1.ClusterPreferences{StaticWeightList: weights},
			},
		}),
		cpp(kindDynamic, policyv1alpha1.Placement{
			ClusterAffinity: groupAffinity,
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{
				{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MinGroups: min(2, regionsInGroup), MaxGroups: min(2, regionsInGroup)},
				{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: min(2, len(members)), MaxGroups: min(3, len(members))},
			},
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
			},
		}),
		cpp(kindAggregated, policyv1alpha1.Placement{
			ClusterAffinity: groupAffinity,
			ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceAggregated,
			},
		}),
	}
}

// database returns the i-th DatabaseCluster of a run over g groups.
func database(i, g int) *dbfleetv1alpha1.DatabaseCluster {
	group := i % g
	kind := kinds[(i/g)%len(kinds)]
	return &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: databaseNamespace(i), Name: databaseName(i),
			Labels: map[string]string{labelGroup: groupName(group), labelPolicy: kind},
		},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{
				Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.4",
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
			},
			Replicas: replicasOf[kind],
		},
	}
}

// createNamespaces creates the databases' namespaces.
func createNamespaces(ctx context.Context, c client.Client) error {
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: databaseNamespace(i), Labels: map[string]string{benchNSLabel: "true"}}}
		if err := client.IgnoreAlreadyExists(c.Create(ctx, ns)); err != nil {
			return fmt.Errorf("create namespace %s: %w", ns.Name, err)
		}
	}
	return nil
}
