package placement

import (
	"errors"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

func toleration(key string, effect corev1.TaintEffect, seconds *int64) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect, TolerationSeconds: seconds}
}

func withAffinity(p policyv1alpha1.Placement, a policyv1alpha1.ClusterAffinity) policyv1alpha1.Placement {
	p.ClusterAffinity = &a
	return p
}

// exclusionOf returns the exclusion of the named cluster.
func exclusionOf(d Decision, cluster string) (Exclusion, bool) {
	for _, e := range d.Excluded {
		if e.Cluster == cluster {
			return e, true
		}
	}
	return Exclusion{}, false
}

func TestClusterAffinity(t *testing.T) {
	fleet := []Cluster{
		withLabels(inRegion(ready("a", 10), "eu", "eu-1"), "env", "prod"),
		withLabels(inRegion(ready("b", 10), "eu", "eu-2"), "env", "dev"),
		withLabels(inRegion(ready("c", 10), "us", "us-1"), "env", "prod"),
		withLabels(inRegion(ready("d", 10), "", ""), "env", "prod"),
	}
	tests := []struct {
		name     string
		affinity policyv1alpha1.ClusterAffinity
		want     string
		excluded map[string]string // cluster -> message
	}{
		{name: "no affinity selects all", want: "a=3 b=3 c=3 d=3"},
		{name: "clusterNames", affinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"a", "c"}}, want: "a=3 c=3",
			excluded: map[string]string{"b": "not listed in clusterAffinity.clusterNames"}},
		{name: "exclude wins over clusterNames", affinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"a", "c"}, ExcludeClusters: []string{"a"}}, want: "c=3",
			excluded: map[string]string{"a": "listed in clusterAffinity.exclude"}},
		{name: "labelSelector", affinity: policyv1alpha1.ClusterAffinity{LabelSelector: labelSelector("env", "prod")}, want: "a=3 c=3 d=3",
			excluded: map[string]string{"b": "labels do not match clusterAffinity.labelSelector"}},
		{name: "labelSelector expression", affinity: policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}}}}, want: "b=3"},
		{name: "fieldSelector region In", affinity: policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "region", Operator: corev1.NodeSelectorOpIn, Values: []string{"eu"}}}}}, want: "a=3 b=3",
			excluded: map[string]string{"c": "provider, region or zone does not match clusterAffinity.fieldSelector"}},
		{name: "fieldSelector NotIn keeps clusters without the field", affinity: policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "region", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"eu"}}}}}, want: "c=3 d=3"},
		{name: "all parts must match", affinity: policyv1alpha1.ClusterAffinity{ClusterNames: []string{"a", "b", "c"}, LabelSelector: labelSelector("env", "prod"),
			FieldSelector: &policyv1alpha1.FieldSelector{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-1", "eu-2"}}}}},
			want: "c=3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustSchedule(t, Input{Replicas: 3, Clusters: fleet, Placement: withAffinity(duplicatedPlacement(), tt.affinity)})
			if got := sharesOf(d); got != tt.want {
				t.Errorf("shares = %s, want %s", got, tt.want)
			}
			for cluster, msg := range tt.excluded {
				e, ok := exclusionOf(d, cluster)
				if !ok || e.Reason != ReasonClusterAffinity || e.Message != msg {
					t.Errorf("exclusion of %s = %+v, want reason %q message %q", cluster, e, ReasonClusterAffinity, msg)
				}
			}
		})
	}
}

func TestClusterAffinitiesFallBackInOrder(t *testing.T) {
	fleet := []Cluster{
		withLabels(ready("dc-1", 2), "site", "dc"),
		withLabels(ready("dc-2", 2), "site", "dc"),
		withLabels(ready("cloud-1", 10), "site", "cloud"),
	}
	p := dynamicPlacement()
	p.ClusterAffinities = []policyv1alpha1.ClusterAffinityTerm{
		{AffinityName: "datacenter", ClusterAffinity: policyv1alpha1.ClusterAffinity{LabelSelector: labelSelector("site", "dc")}},
		{AffinityName: "cloud", ClusterAffinity: policyv1alpha1.ClusterAffinity{LabelSelector: labelSelector("site", "cloud")}},
	}

	d := mustSchedule(t, Input{Replicas: 4, Clusters: fleet, Placement: p})
	if d.AffinityName != "datacenter" || sharesOf(d) != "dc-1=2 dc-2=2" {
		t.Errorf("4 replicas fit the first group: got %s in %q", sharesOf(d), d.AffinityName)
	}
	if e, _ := exclusionOf(d, "cloud-1"); e.Message != "labels do not match clusterAffinities[datacenter].labelSelector" {
		t.Errorf("cloud-1 exclusion = %+v", e)
	}

	d = mustSchedule(t, Input{Replicas: 6, Clusters: fleet, Placement: p})
	if d.AffinityName != "cloud" || sharesOf(d) != "cloud-1=6" {
		t.Errorf("6 replicas do not fit the first group, so the second wins: got %s in %q", sharesOf(d), d.AffinityName)
	}

	_, err := Schedule(Input{Replicas: 20, Clusters: fleet, Placement: p, Now: t0})
	want := "clusterAffinities[datacenter]: 2/3 clusters fit but they can take only 4 more replicas and 20 are needed: 1 excluded by clusterAffinity; " +
		"clusterAffinities[cloud]: 1/3 clusters fit but they can take only 10 more replicas and 20 are needed: 2 excluded by clusterAffinity"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
}

func TestTaintsAndReadiness(t *testing.T) {
	longAgo := t0.Add(-time.Hour)
	recently := t0.Add(-5 * time.Second)
	elevenSecondsAgo := t0.Add(-11 * time.Second)
	unreachableFor30s := []corev1.Toleration{toleration(v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, ptr.To[int64](30))}
	tests := []struct {
		name        string
		b           Cluster
		tolerations []corev1.Toleration
		previous    *Decision
		replicas    int32
		want        string
		bReason     string
	}{
		{name: "NoSchedule keeps new replicas off", b: withTaint(ready("b", 10), "dedicated", corev1.TaintEffectNoSchedule, nil),
			replicas: 4, want: "a=4", bReason: "untolerated taint dedicated:NoSchedule"},
		{name: "tolerated NoSchedule", b: withTaint(ready("b", 10), "dedicated", corev1.TaintEffectNoSchedule, nil),
			tolerations: []corev1.Toleration{toleration("dedicated", corev1.TaintEffectNoSchedule, nil)}, replicas: 4, want: "a=2 b=2"},
		{name: "NoSchedule keeps an existing share but never grows it", b: withTaint(ready("b", 10), "dedicated", corev1.TaintEffectNoSchedule, nil),
			previous: previous("a", 2, "b", 2), replicas: 6, want: "a=4 b=2"},
		{name: "NoSchedule share can shrink", b: withTaint(ready("b", 10), "dedicated", corev1.TaintEffectNoSchedule, nil),
			previous: previous("a", 2, "b", 2), replicas: 2, want: "a=1 b=1"},
		{name: "untolerated NoExecute evicts at once", b: withTaint(ready("b", 10), "quarantine", corev1.TaintEffectNoExecute, &recently),
			previous: previous("a", 2, "b", 2), replicas: 4, want: "a=4", bReason: "untolerated taint quarantine:NoExecute"},
		{name: "the hub's health taints are tolerated 10s by default", b: withTaint(notReady(ready("b", 10)), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &recently),
			previous: previous("a", 2, "b", 2), replicas: 4, want: "a=2 b=2"},
		{name: "the default toleration runs out", b: withTaint(notReady(ready("b", 10)), v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoExecute, &elevenSecondsAgo),
			previous: previous("a", 2, "b", 2), replicas: 4, want: "a=4", bReason: ReasonNotReadyTaint},
		{name: "an explicit toleration replaces the default", b: withTaint(notReady(ready("b", 10)), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &elevenSecondsAgo),
			tolerations: unreachableFor30s, previous: previous("a", 2, "b", 2), replicas: 4, want: "a=2 b=2"},
		{name: "tolerated NoExecute keeps the share until the toleration ends", b: withTaint(notReady(ready("b", 10)), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &recently),
			tolerations: unreachableFor30s, previous: previous("a", 2, "b", 2), replicas: 4, want: "a=2 b=2"},
		{name: "while tolerated it gains nothing", b: withTaint(notReady(ready("b", 10)), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &recently),
			tolerations: unreachableFor30s, previous: previous("a", 2, "b", 2), replicas: 8, want: "a=6 b=2"},
		{name: "expired toleration evicts", b: withTaint(notReady(ready("b", 10)), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &longAgo),
			tolerations: unreachableFor30s, previous: previous("a", 2, "b", 2), replicas: 4, want: "a=4", bReason: ReasonUnreachable},
		{name: "a taint without timeAdded counts down from now", b: withTaint(notReady(ready("b", 10)), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, nil),
			tolerations: unreachableFor30s, previous: previous("a", 2, "b", 2), replicas: 4, want: "a=2 b=2"},
		{name: "toleration without seconds tolerates forever", b: withTaint(ready("b", 10), "maintenance", corev1.TaintEffectNoExecute, &longAgo),
			tolerations: []corev1.Toleration{toleration("maintenance", "", nil)}, replicas: 4, want: "a=2 b=2"},
		{name: "zero tolerationSeconds evicts at once", b: withTaint(notReady(ready("b", 10)), v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoExecute, &recently),
			tolerations: []corev1.Toleration{toleration(v1alpha1.TaintClusterNotReady, corev1.TaintEffectNoExecute, ptr.To[int64](0))},
			previous:    previous("a", 2, "b", 2), replicas: 4, want: "a=4", bReason: ReasonNotReadyTaint},
		{name: "unready cluster gets nothing new", b: notReady(ready("b", 10)), replicas: 4, want: "a=4", bReason: ReasonNotReady},
		{name: "unready cluster keeps its share", b: notReady(ready("b", 10)), previous: previous("a", 2, "b", 2), replicas: 5, want: "a=3 b=2"},
		{name: "PreferNoSchedule is ignored", b: withTaint(ready("b", 10), "soft", corev1.TaintEffectPreferNoSchedule, nil), replicas: 4, want: "a=2 b=2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := dynamicPlacement()
			p.ClusterTolerations = tt.tolerations
			d := mustSchedule(t, Input{Replicas: tt.replicas, Clusters: []Cluster{ready("a", 10), tt.b}, Placement: p, Previous: tt.previous})
			if got := sharesOf(d); got != tt.want {
				t.Errorf("shares = %s, want %s", got, tt.want)
			}
			if tt.bReason != "" {
				if e, _ := exclusionOf(d, "b"); e.Reason != tt.bReason {
					t.Errorf("b excluded for %q (%s), want %q", e.Reason, e.Message, tt.bReason)
				}
			}
		})
	}
}

func TestUnschedulableMessages(t *testing.T) {
	recently := t0.Add(-time.Second)
	unreachable := func(name string) Cluster {
		return withTaint(notReady(ready(name, 10)), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &recently)
	}
	tests := []struct {
		name string
		in   Input
		want string
	}{
		{name: "the issue's example",
			in: Input{Replicas: 3, Placement: withAffinity(dynamicPlacement(), policyv1alpha1.ClusterAffinity{ClusterNames: []string{"a", "b"}}),
				Clusters: []Cluster{unreachable("a"), unreachable("b"), ready("c", 5), ready("d", 5), ready("e", 5)}},
			want: "0/5 clusters fit: 2 unreachable (dbfleet.io/unreachable), 3 excluded by clusterAffinity"},
		{name: "no clusters", in: Input{Replicas: 3, Placement: dynamicPlacement()}, want: "0/0 clusters fit: no member clusters"},
		{name: "capacity", in: Input{Replicas: 9, Placement: aggregatedPlacement(), Clusters: []Cluster{ready("a", 2), ready("b", 3), notReady(ready("c", 9))}},
			want: "2/3 clusters fit but they can take only 5 more replicas and 9 are needed: 1 not ready"},
		{name: "spread groups", in: Input{Replicas: 3, Placement: policyv1alpha1.Placement{
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "region", MinGroups: 3}}},
			Clusters: []Cluster{inRegion(ready("a", 9), "eu", ""), inRegion(ready("b", 9), "us", ""), ready("c", 9)}},
			want: "2/3 clusters fit but spreadConstraints need at least 3 regions and they span 2: 1 no region for spreadConstraints"},
		{name: "spread clusters", in: Input{Replicas: 3, Placement: policyv1alpha1.Placement{
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "cluster", MinGroups: 3}}},
			Clusters: []Cluster{ready("a", 9), ready("b", 9)}},
			want: "2/2 clusters fit but spreadConstraints need at least 3 clusters and only 2 qualify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = t0
			_, err := Schedule(tt.in)
			var u *UnschedulableError
			if !errors.As(err, &u) {
				t.Fatalf("want an UnschedulableError, got %v", err)
			}
			if err.Error() != tt.want {
				t.Errorf("message:\n got %s\nwant %s", err, tt.want)
			}
		})
	}
}

func TestInvalidInput(t *testing.T) {
	tests := []struct {
		name string
		in   Input
	}{
		{name: "negative replicas", in: Input{Replicas: -1}},
		{name: "duplicate cluster", in: Input{Replicas: 1, Clusters: []Cluster{ready("a", 1), ready("a", 1)}}},
		{name: "spreadByLabel", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByLabel: "x"}}}}},
		{name: "bad field key", in: Input{Replicas: 1, Placement: withAffinity(dynamicPlacement(), policyv1alpha1.ClusterAffinity{FieldSelector: &policyv1alpha1.FieldSelector{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "name", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}})}},
		{name: "bad label operator", in: Input{Replicas: 1, Placement: withAffinity(dynamicPlacement(), policyv1alpha1.ClusterAffinity{LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}})}},
		{name: "both affinity forms", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{ClusterAffinity: &policyv1alpha1.ClusterAffinity{},
			ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "x"}}}}},
		{name: "duplicate affinity names", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{
			ClusterAffinities: []policyv1alpha1.ClusterAffinityTerm{{AffinityName: "x"}, {AffinityName: "x"}}}}},
		{name: "PreferNoSchedule toleration", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{
			ClusterTolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule}}}}},
		{name: "numeric toleration operator", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{
			ClusterTolerations: []corev1.Toleration{{Key: "k", Operator: "Gt", Value: "1"}}}}},
		{name: "min above max", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "zone", MinGroups: 3, MaxGroups: 2}}}}},
		{name: "repeated spread field", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{
			SpreadConstraints: []policyv1alpha1.SpreadConstraint{{SpreadByField: "zone"}, {SpreadByField: "zone"}}}}},
		{name: "zero static weight", in: Input{Replicas: 1, Placement: staticPlacement(map[string]int64{"a": 0})}},
		{name: "unknown dynamic weight", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: "Divided", WeightPreference: &policyv1alpha1.ClusterPreferences{DynamicWeight: "Memory"}}}}},
		{name: "unknown scheduling type", in: Input{Replicas: 1, Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType: "Sharded"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Schedule(tt.in)
			if !errors.Is(err, ErrInvalidPlacement) {
				t.Fatalf("want ErrInvalidPlacement, got %v", err)
			}
			if tt.in.Replicas >= 0 && len(tt.in.Clusters) == 0 {
				if verr := Validate(&tt.in.Placement); !errors.Is(verr, ErrInvalidPlacement) {
					t.Errorf("Validate = %v, want the same error", verr)
				}
			}
		})
	}
}

func TestZeroReplicas(t *testing.T) {
	d := mustSchedule(t, Input{Replicas: 0, Clusters: []Cluster{ready("a", 1), ready("b", 1)}, Placement: dynamicPlacement(),
		Previous: previous("a", 1)})
	if len(d.Shares) != 0 || d.Primary != "" || len(d.Excluded) != 2 || d.Excluded[0].Reason != ReasonNoReplicas {
		t.Errorf("zero replicas: %+v", d)
	}
}

func TestNextEviction(t *testing.T) {
	added := t0.Add(-4 * time.Second)
	in := Input{Now: t0, Clusters: []Cluster{
		withTaint(ready("a", 1), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &added),
		withTaint(ready("b", 1), "maintenance", corev1.TaintEffectNoExecute, &added),
	}}
	next, ok := NextEviction(&in)
	if !ok || !next.Equal(added.Add(DefaultTolerationSeconds*time.Second)) {
		t.Errorf("NextEviction = %v, %v; want the default toleration's end %v", next, ok, added.Add(10*time.Second))
	}
	in.Placement.ClusterTolerations = []corev1.Toleration{toleration(v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, nil)}
	if _, ok := NextEviction(&in); ok {
		t.Error("a toleration without seconds never runs out")
	}
	if got := EffectiveTolerations(in.Placement.ClusterTolerations, DefaultTolerationSeconds); len(got) != 2 || got[1].Key != v1alpha1.TaintClusterNotReady {
		t.Errorf("EffectiveTolerations = %+v, want the explicit one plus the not-ready default", got)
	}
}

// The hub's --default-unreachable-toleration replaces the built-in default, both for the decision
// and for the predicted eviction time.
func TestDefaultTolerationIsConfigurable(t *testing.T) {
	added := t0.Add(-4 * time.Second)
	in := Input{Now: t0, Replicas: 2, Placement: dynamicPlacement(), Previous: previous("a", 1, "b", 1), Clusters: []Cluster{
		withTaint(ready("a", 5), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &added),
		ready("b", 5),
	}}
	if d := mustSchedule(t, in); d.ShareOf("a") != 1 {
		t.Fatalf("4 s into the built-in 10 s toleration the share stays: %+v", d.Shares)
	}
	three := int64(3)
	in.DefaultTolerationSeconds = &three
	if d := mustSchedule(t, in); d.ShareOf("a") != 0 || d.ShareOf("b") != 2 {
		t.Errorf("with a 3 s default toleration the share is evicted after 4 s: %+v", d.Shares)
	}
	thirty := int64(30)
	in.DefaultTolerationSeconds = &thirty
	if next, ok := NextEviction(&in); !ok || !next.Equal(added.Add(30*time.Second)) {
		t.Errorf("NextEviction = %v, %v; want the configured toleration's end %v", next, ok, added.Add(30*time.Second))
	}
}
