package placement

import (
	"fmt"
	"math/rand/v2"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// benchFleet is n clusters over 10 regions, 3 zones per region and 3 providers, with labels,
// varied capacity, 2% unreachable and 2% NoSchedule-tainted, in shuffled order (the engine may
// not rely on sorted input).
func benchFleet(n int) []Cluster {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	clusters := make([]Cluster, n)
	for i := range clusters {
		region := i % 10
		c := Cluster{
			Name:              fmt.Sprintf("member-%05d", i),
			Region:            fmt.Sprintf("region-%d", region),
			Zone:              fmt.Sprintf("region-%d-%c", region, 'a'+rune(i/10%3)),
			Provider:          []string{"aws", "gcp", "azure"}[i%3],
			Labels:            map[string]string{"env": "prod", "tier": []string{"gold", "silver"}[i%2]},
			Ready:             true,
			AvailableReplicas: int32(5 + r.IntN(40)),
		}
		switch r.IntN(50) {
		case 0:
			c.Ready = false
			c.Taints = []corev1.Taint{{Key: v1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}}
		case 1:
			c.Taints = []corev1.Taint{{Key: "dedicated", Value: "analytics", Effect: corev1.TaintEffectNoSchedule}}
		}
		clusters[i] = c
	}
	r.Shuffle(n, func(i, j int) { clusters[i], clusters[j] = clusters[j], clusters[i] })
	return clusters
}

// benchPlacement gives each strategy spread constraints: by region and by cluster.
func benchPlacement(strategy string) policyv1alpha1.Placement {
	var p policyv1alpha1.Placement
	switch strategy {
	case "Duplicated":
		p = duplicatedPlacement()
	case "StaticWeight":
		p = staticPlacement(nil)
		p.ReplicaScheduling.WeightPreference = &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: policyv1alpha1.ClusterAffinity{LabelSelector: labelSelector("tier", "gold")}, Weight: 2},
			{TargetCluster: policyv1alpha1.ClusterAffinity{LabelSelector: labelSelector("tier", "silver")}, Weight: 1},
		}}
	case "DynamicWeight":
		p = dynamicPlacement()
	case "Aggregated":
		p = aggregatedPlacement()
	}
	p.ClusterAffinity = &policyv1alpha1.ClusterAffinity{LabelSelector: labelSelector("env", "prod")}
	p.ClusterTolerations = []corev1.Toleration{{Key: v1alpha1.TaintClusterUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)}}
	p.SpreadConstraints = []policyv1alpha1.SpreadConstraint{
		{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MinGroups: 3, MaxGroups: 5},
		{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 3, MaxGroups: 60},
	}
	return p
}

var benchSink Decision

var strategies = []string{"Duplicated", "StaticWeight", "DynamicWeight", "Aggregated"}

// BenchmarkSchedule measures one decision per strategy and fleet size, fresh (no previous
// decision) and steady (rescheduling with the decision in force, what a reconcile loop does),
// with the snapshot sorted once as SortClusters recommends.
func BenchmarkSchedule(b *testing.B) {
	for _, strategy := range strategies {
		for _, n := range []int{10, 100, 1000, 5000} {
			fleet := benchFleet(n)
			SortClusters(fleet)
			in := Input{Replicas: 100, Clusters: fleet, Placement: benchPlacement(strategy), Now: t0,
				PreferredPrimaries: []string{"member-00003"}}
			first, err := Schedule(in)
			if err != nil {
				b.Fatalf("%s/%d: %v", strategy, n, err)
			}
			steady := in
			steady.Previous = &first
			for _, c := range []struct {
				mode string
				in   Input
			}{{"fresh", in}, {"steady", steady}} {
				b.Run(fmt.Sprintf("%s/%s/clusters=%d", strategy, c.mode, n), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						d, err := Schedule(c.in)
						if err != nil {
							b.Fatal(err)
						}
						benchSink = d
					}
				})
			}
		}
	}
}

// BenchmarkScheduleUnsorted is BenchmarkSchedule's fresh case with the snapshot in random order,
// so Schedule pays for sorting the names itself.
func BenchmarkScheduleUnsorted(b *testing.B) {
	for _, strategy := range strategies {
		for _, n := range []int{1000, 5000} {
			in := Input{Replicas: 100, Clusters: benchFleet(n), Placement: benchPlacement(strategy), Now: t0,
				PreferredPrimaries: []string{"member-00003"}}
			b.Run(fmt.Sprintf("%s/fresh/clusters=%d", strategy, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					d, err := Schedule(in)
					if err != nil {
						b.Fatal(err)
					}
					benchSink = d
				}
			})
		}
	}
}
