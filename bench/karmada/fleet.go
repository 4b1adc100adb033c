package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadacache "github.com/karmada-io/karmada/pkg/scheduler/cache"
	"github.com/karmada-io/karmada/pkg/scheduler/core"
	"github.com/karmada-io/karmada/pkg/scheduler/framework/plugins/clusteraffinity"
	"github.com/karmada-io/karmada/pkg/scheduler/framework/plugins/clustereviction"
	"github.com/karmada-io/karmada/pkg/scheduler/framework/plugins/clusterlocality"
	"github.com/karmada-io/karmada/pkg/scheduler/framework/plugins/spreadconstraint"
	"github.com/karmada-io/karmada/pkg/scheduler/framework/plugins/tainttoleration"
	"github.com/karmada-io/karmada/pkg/scheduler/framework/runtime"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dbfleet/dbfleet/pkg/placement"
)

// Sizes are the fleet sizes compared.
var Sizes = []int{10, 100, 1000, 5000}

// Strategies are the replica scheduling strategies compared.
var Strategies = []string{"Duplicated", "StaticWeight", "DynamicWeight", "Aggregated"}

// Replicas is spec.replicas of the database (the Karmada ResourceBinding's spec.replicas): 3 per
// cluster with Duplicated (a primary and two standbys everywhere), 100 divided otherwise.
func Replicas(strategy string) int32 {
	if strategy == "Duplicated" {
		return 3
	}
	return 100
}

// now is the decision time given to dbfleet (taints carry no timeAdded, so it does not matter).
var now = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// taintUnreachable is the NoExecute taint of unready clusters. dbfleet tolerates its own health
// taints for 10 s by default but never gives an unready cluster new replicas; Karmada's
// TaintToleration filter drops the cluster because the placement does not tolerate the taint. Both
// therefore leave these clusters out.
const taintUnreachable = "dbfleet.io/unreachable"

// Member is one generated cluster, engine-neutral.
type Member struct {
	Name, Region, Zone, Provider string
	Labels                       map[string]string
	Taints                       []corev1.Taint
	Ready                        bool
	Available                    int32
}

// Fleet generates n clusters deterministically (seeded by n): 10 regions, 3 zones per region, 3
// providers, labels env=prod and tier=gold|silver, available replicas 5..44, 2% unready (with a
// NoExecute unreachable taint) and 2% with an untolerated NoSchedule taint. The order is shuffled.
func Fleet(n int) []Member {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	fleet := make([]Member, n)
	for i := range fleet {
		region := i % 10
		m := Member{
			Name:      fmt.Sprintf("member-%05d", i),
			Region:    fmt.Sprintf("region-%d", region),
			Zone:      fmt.Sprintf("region-%d-%c", region, 'a'+rune(i/10%3)),
			Provider:  []string{"aws", "gcp", "azure"}[i%3],
			Labels:    map[string]string{"env": "prod", "tier": []string{"gold", "silver"}[i%2]},
			Ready:     true,
			Available: int32(5 + r.IntN(40)),
		}
		switch r.IntN(50) {
		case 0:
			m.Ready = false
			m.Taints = []corev1.Taint{{Key: taintUnreachable, Effect: corev1.TaintEffectNoExecute}}
		case 1:
			m.Taints = []corev1.Taint{{Key: "dedicated", Value: "analytics", Effect: corev1.TaintEffectNoSchedule}}
		}
		fleet[i] = m
	}
	r.Shuffle(n, func(i, j int) { fleet[i], fleet[j] = fleet[j], fleet[i] })
	return fleet
}

// Placement is the policy of a strategy: clusterAffinity env=prod, no tolerations, and, when
// spread is set, spread constraints by region (3..5) and by cluster (3..60).
func Placement(strategy string, spread bool) policyv1alpha1.Placement {
	rs := &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDivided}
	switch strategy {
	case "Duplicated":
		rs = &policyv1alpha1.ReplicaSchedulingStrategy{ReplicaSchedulingType: policyv1alpha1.ReplicaSchedulingTypeDuplicated}
	case "StaticWeight":
		rs.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
		rs.WeightPreference = &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: policyv1alpha1.ClusterAffinity{LabelSelector: selector("tier", "gold")}, Weight: 2},
			{TargetCluster: policyv1alpha1.ClusterAffinity{LabelSelector: selector("tier", "silver")}, Weight: 1},
		}}
	case "DynamicWeight":
		rs.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceWeighted
		rs.WeightPreference = &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas}
	case "Aggregated":
		rs.ReplicaDivisionPreference = policyv1alpha1.ReplicaDivisionPreferenceAggregated
	default:
		panic("unknown strategy " + strategy)
	}
	p := policyv1alpha1.Placement{
		ClusterAffinity:   &policyv1alpha1.ClusterAffinity{LabelSelector: selector("env", "prod")},
		ReplicaScheduling: rs,
	}
	if spread {
		p.SpreadConstraints = []policyv1alpha1.SpreadConstraint{
			{SpreadByField: policyv1alpha1.SpreadByFieldRegion, MinGroups: 3, MaxGroups: 5},
			{SpreadByField: policyv1alpha1.SpreadByFieldCluster, MinGroups: 3, MaxGroups: 60},
		}
	}
	return p
}

func selector(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

// DBFleet is dbfleet's engine on one fleet: the snapshot is converted and sorted once, as the hub
// does for many databases against one snapshot (placement.SortClusters).
type DBFleet struct {
	clusters []placement.Cluster
}

// NewDBFleet converts the fleet to placement.Cluster.
func NewDBFleet(fleet []Member) *DBFleet {
	cs := make([]placement.Cluster, len(fleet))
	for i, m := range fleet {
		cs[i] = placement.Cluster{Name: m.Name, Labels: m.Labels, Region: m.Region, Zone: m.Zone, Provider: m.Provider,
			Taints: m.Taints, Ready: m.Ready, AvailableReplicas: m.Available}
	}
	placement.SortClusters(cs)
	return &DBFleet{clusters: cs}
}

// Schedule places a new database (no previous decision) and returns cluster -> replicas.
func (e *DBFleet) Schedule(strategy string, p policyv1alpha1.Placement) (map[string]int32, error) {
	d, err := e.decide(strategy, p)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int32, len(d.Shares))
	for _, s := range d.Shares {
		out[s.Cluster] = s.Replicas
	}
	return out, nil
}

func (e *DBFleet) decide(strategy string, p policyv1alpha1.Placement) (placement.Decision, error) {
	return placement.Schedule(placement.Input{Replicas: Replicas(strategy), Placement: p, Clusters: e.clusters, Now: now})
}

// Karmada is Karmada v1.16's generic scheduler (core.NewGenericScheduler) over a lister holding
// the fleet, with the in-tree filter and score plugins that apply to a cluster snapshot:
// TaintToleration, ClusterAffinity, SpreadConstraint, ClusterLocality, ClusterEviction.
// APIEnablement is left out: dbfleet has no equivalent (every member runs the agent's CRDs).
// Available replicas come from Karmada's general estimator, from status.resourceSummary: the
// database requests nothing, so the allowed pod count (allocatable pods) is the bound.
type Karmada struct {
	algo core.ScheduleAlgorithm
}

// NewKarmada converts the fleet to clusterv1alpha1.Cluster and builds the scheduler.
func NewKarmada(fleet []Member) (*Karmada, error) {
	l := &lister{}
	for _, m := range fleet {
		c := &clusterv1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Labels: m.Labels},
			Spec: clusterv1alpha1.ClusterSpec{Region: m.Region, Zones: []string{m.Zone}, Provider: m.Provider,
				Taints: m.Taints},
		}
		status := metav1.ConditionTrue
		if !m.Ready {
			status = metav1.ConditionFalse
		}
		c.Status.Conditions = []metav1.Condition{{Type: clusterv1alpha1.ClusterConditionReady, Status: status}}
		c.Status.ResourceSummary = &clusterv1alpha1.ResourceSummary{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(int64(m.Available), resource.DecimalSI)},
		}
		l.clusters = append(l.clusters, c)
	}
	registry := runtime.Registry{
		tainttoleration.Name:  tainttoleration.New,
		clusteraffinity.Name:  clusteraffinity.New,
		spreadconstraint.Name: spreadconstraint.New,
		clusterlocality.Name:  clusterlocality.New,
		clustereviction.Name:  clustereviction.New,
	}
	algo, err := core.NewGenericScheduler(karmadacache.NewCache(l), registry)
	if err != nil {
		return nil, fmt.Errorf("building Karmada's generic scheduler: %w", err)
	}
	return &Karmada{algo: algo}, nil
}

// Schedule places a new binding (no previous clusters) and returns cluster -> replicas.
func (e *Karmada) Schedule(strategy string, p policyv1alpha1.Placement) (map[string]int32, error) {
	res, err := e.decide(strategy, p)
	if err != nil {
		return nil, err
	}
	out := make(map[string]int32, len(res.SuggestedClusters))
	for _, t := range res.SuggestedClusters {
		out[t.Name] = t.Replicas
	}
	return out, nil
}

func (e *Karmada) decide(strategy string, p policyv1alpha1.Placement) (res core.ScheduleResult, err error) {
	// Karmada v1.16 divides by zero in calcGroupScoreForDuplicate when, with Duplicated and a
	// region constraint, no cluster of a region can hold all replicas; report it as an error.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("karmada scheduler panicked: %v", r)
		}
	}()
	spec := &workv1alpha2.ResourceBindingSpec{
		Resource: workv1alpha2.ObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Namespace: "db", Name: "orders",
			UID: tieUID},
		Replicas:  Replicas(strategy),
		Placement: &p,
	}
	return e.algo.Schedule(context.Background(), spec, &workv1alpha2.ResourceBindingStatus{}, &core.ScheduleAlgorithmOption{})
}

// tieUID is the binding's UID. Karmada breaks Webster ties by the UID's FNV-32a hash: an even hash
// favours the smaller cluster name, as dbfleet always does. This UID hashes even, so both engines
// break ties the same way; with an odd one every tie goes the other way (see knownDifference).
const tieUID = types.UID("5f0c6a52-9d3e-4b1a-8f0e-2c7d1e9a4b61")

// lister is a clusterlister.ClusterLister over a fixed slice (Karmada's cache deep-copies it on
// every Snapshot, as it does with its informer's lister).
type lister struct {
	clusters []*clusterv1alpha1.Cluster
}

func (l *lister) List(labels.Selector) ([]*clusterv1alpha1.Cluster, error) { return l.clusters, nil }

func (l *lister) Get(name string) (*clusterv1alpha1.Cluster, error) {
	for _, c := range l.clusters {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("cluster %q not found", name)
}

// Format renders shares as "name=replicas" in name order.
func Format(shares map[string]int32) string {
	names := make([]string, 0, len(shares))
	for n := range shares {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", n, shares[n])
	}
	return b.String()
}
