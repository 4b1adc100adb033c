package databasecluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestOffersRoom(t *testing.T) {
	ready := func(status metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: dbfleetv1alpha1.ConditionReady, Status: status}}
	}
	base := func() *dbfleetv1alpha1.MemberCluster {
		return &dbfleetv1alpha1.MemberCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "east", Labels: map[string]string{"tier": "gold"}},
			Spec:       dbfleetv1alpha1.MemberClusterSpec{Region: "us-east", Zone: "a"},
			Status:     dbfleetv1alpha1.MemberClusterStatus{Conditions: ready(metav1.ConditionTrue)},
		}
	}
	unreachable := corev1.Taint{Key: dbfleetv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}
	tests := []struct {
		name   string
		change func(old, cur *dbfleetv1alpha1.MemberCluster)
		want   bool
	}{
		{"turns Unknown", func(_, cur *dbfleetv1alpha1.MemberCluster) { cur.Status.Conditions = ready(metav1.ConditionUnknown) }, false},
		{"turns Ready", func(old, _ *dbfleetv1alpha1.MemberCluster) { old.Status.Conditions = ready(metav1.ConditionUnknown) }, true},
		{"gains a taint", func(_, cur *dbfleetv1alpha1.MemberCluster) { cur.Spec.Taints = []corev1.Taint{unreachable} }, false},
		{"loses a taint", func(old, _ *dbfleetv1alpha1.MemberCluster) { old.Spec.Taints = []corev1.Taint{unreachable} }, true},
		{"new labels", func(_, cur *dbfleetv1alpha1.MemberCluster) { cur.Labels = map[string]string{"tier": "silver"} }, true},
		{"new region", func(_, cur *dbfleetv1alpha1.MemberCluster) { cur.Spec.Region = "us-west" }, true},
		{"capacity changes", func(_, cur *dbfleetv1alpha1.MemberCluster) {
			cur.Status.ResourceSummary = &dbfleetv1alpha1.ResourceSummary{}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, cur := base(), base()
			tt.change(old, cur)
			if got := offersRoom(old, cur); got != tt.want {
				t.Errorf("offersRoom = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIndexes(t *testing.T) {
	dbc := &dbfleetv1alpha1.DatabaseCluster{Status: dbfleetv1alpha1.DatabaseClusterStatus{
		Placements: []dbfleetv1alpha1.ClusterPlacement{{Cluster: "east"}, {Cluster: "west"}},
		Primary:    &dbfleetv1alpha1.PrimaryStatus{Cluster: "north"},
	}}
	if got := indexPlacedOn(dbc); len(got) != 3 || got[0] != "east" || got[1] != "west" || got[2] != "north" {
		t.Errorf("indexPlacedOn = %v, want [east west north]", got)
	}
	if got := indexUnscheduled(dbc); len(got) != 1 {
		t.Errorf("indexUnscheduled of a database without Scheduled = %v, want [true]", got)
	}
	dbc.Status.Conditions = []metav1.Condition{{Type: dbfleetv1alpha1.ConditionScheduled, Status: metav1.ConditionTrue}}
	if got := indexUnscheduled(dbc); len(got) != 0 {
		t.Errorf("indexUnscheduled of a scheduled database = %v, want none", got)
	}
}
