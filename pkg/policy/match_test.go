package policy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func dbc(ns, name string, labels map[string]string) *dbfleetv1alpha1.DatabaseCluster {
	return &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

func pp(ns, name string, prio *int32, sels ...dbfleetv1alpha1.ResourceSelector) dbfleetv1alpha1.PropagationPolicy {
	return dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       dbfleetv1alpha1.PropagationSpec{ResourceSelectors: sels, Priority: prio},
	}
}

func cpp(name string, prio *int32, sels ...dbfleetv1alpha1.ResourceSelector) dbfleetv1alpha1.ClusterPropagationPolicy {
	return dbfleetv1alpha1.ClusterPropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       dbfleetv1alpha1.PropagationSpec{ResourceSelectors: sels, Priority: prio},
	}
}

var (
	byName    = dbfleetv1alpha1.ResourceSelector{Name: "orders"}
	byLabel   = dbfleetv1alpha1.ResourceSelector{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "critical"}}}
	everyone  = dbfleetv1alpha1.ResourceSelector{}
	otherName = dbfleetv1alpha1.ResourceSelector{Name: "invoices"}
)

func TestSelect(t *testing.T) {
	orders := dbc("shop", "orders", map[string]string{"tier": "critical"})
	for _, tc := range []struct {
		name string
		pps  []dbfleetv1alpha1.PropagationPolicy
		cpps []dbfleetv1alpha1.ClusterPropagationPolicy
		want string // "Kind/name", or "" for no match
	}{
		{name: "nothing selects", pps: []dbfleetv1alpha1.PropagationPolicy{pp("shop", "a", nil, otherName)}, want: ""},
		{name: "other namespace ignored", pps: []dbfleetv1alpha1.PropagationPolicy{pp("bank", "a", nil, byName)}, want: ""},
		{name: "priority wins over precision",
			pps:  []dbfleetv1alpha1.PropagationPolicy{pp("shop", "by-name", ptr.To[int32](1), byName)},
			cpps: []dbfleetv1alpha1.ClusterPropagationPolicy{cpp("all", ptr.To[int32](5), everyone)},
			want: "ClusterPropagationPolicy/all"},
		{name: "name beats labels at equal priority",
			pps:  []dbfleetv1alpha1.PropagationPolicy{pp("shop", "a-labels", nil, byLabel)},
			cpps: []dbfleetv1alpha1.ClusterPropagationPolicy{cpp("z-name", nil, byName)},
			want: "ClusterPropagationPolicy/z-name"},
		{name: "labels beat select-all",
			pps:  []dbfleetv1alpha1.PropagationPolicy{pp("shop", "a-all", nil, everyone), pp("shop", "b-labels", nil, byLabel)},
			want: "PropagationPolicy/b-labels"},
		{name: "namespaced beats cluster-scoped at equal priority and precision",
			pps:  []dbfleetv1alpha1.PropagationPolicy{pp("shop", "z", nil, byLabel)},
			cpps: []dbfleetv1alpha1.ClusterPropagationPolicy{cpp("a", nil, byLabel)},
			want: "PropagationPolicy/z"},
		{name: "name order breaks the last tie",
			pps:  []dbfleetv1alpha1.PropagationPolicy{pp("shop", "b", nil, byName), pp("shop", "a", nil, byName)},
			want: "PropagationPolicy/a"},
		{name: "best selector of a policy counts",
			pps:  []dbfleetv1alpha1.PropagationPolicy{pp("shop", "a", nil, byLabel), pp("shop", "b", nil, otherName, byName)},
			want: "PropagationPolicy/b"},
		{name: "cluster policy restricted to another namespace",
			cpps: []dbfleetv1alpha1.ClusterPropagationPolicy{cpp("bank-only", nil, dbfleetv1alpha1.ResourceSelector{Namespace: "bank"})},
			want: ""},
		{name: "cluster policy restricted to this namespace",
			cpps: []dbfleetv1alpha1.ClusterPropagationPolicy{cpp("shop-only", nil, dbfleetv1alpha1.ResourceSelector{Namespace: "shop"})},
			want: "ClusterPropagationPolicy/shop-only"},
		{name: "label selector that does not match",
			pps: []dbfleetv1alpha1.PropagationPolicy{pp("shop", "a", nil, dbfleetv1alpha1.ResourceSelector{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}})},
			want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Select(orders, tc.pps, tc.cpps)
			gotName := ""
			if got != nil {
				gotName = got.Ref.Kind + "/" + got.Ref.Name
			}
			if gotName != tc.want {
				t.Errorf("Select() = %q, want %q", gotName, tc.want)
			}
		})
	}
}

func TestSelectSkipsPoliciesBeingDeleted(t *testing.T) {
	orders := dbc("shop", "orders", map[string]string{"tier": "critical"})
	now := metav1.Now()
	going := pp("shop", "going", ptr.To[int32](10), byName)
	going.DeletionTimestamp = &now
	goingCluster := cpp("going-too", ptr.To[int32](10), byName)
	goingCluster.DeletionTimestamp = &now
	got := Select(orders, []dbfleetv1alpha1.PropagationPolicy{going, pp("shop", "stays", nil, byLabel)},
		[]dbfleetv1alpha1.ClusterPropagationPolicy{goingCluster})
	if got == nil || got.Ref.Name != "stays" {
		t.Errorf("Select() = %+v, want the policy that is not being deleted", got)
	}
}

func TestSelectIgnoresInputOrder(t *testing.T) {
	orders := dbc("shop", "orders", map[string]string{"tier": "critical"})
	a := []dbfleetv1alpha1.PropagationPolicy{pp("shop", "x", nil, byLabel), pp("shop", "y", nil, byLabel)}
	b := []dbfleetv1alpha1.PropagationPolicy{a[1], a[0]}
	if Select(orders, a, nil).Ref != Select(orders, b, nil).Ref {
		t.Error("the winner depends on list order")
	}
}
