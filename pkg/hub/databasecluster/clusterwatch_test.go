package databasecluster

import (
	"context"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheme"
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

// A cluster coming back wakes every database, behind the databases with work of their own; one
// going away wakes those placed on it at the default priority.
func TestClusterEventsWakeDatabasesByUrgency(t *testing.T) {
	scheduled := []metav1.Condition{{Type: dbfleetv1alpha1.ConditionScheduled, Status: metav1.ConditionTrue}}
	placed := func(name, cluster string) *dbfleetv1alpha1.DatabaseCluster {
		return &dbfleetv1alpha1.DatabaseCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Status: dbfleetv1alpha1.DatabaseClusterStatus{Conditions: scheduled,
				Placements: []dbfleetv1alpha1.ClusterPlacement{{Cluster: cluster, Replicas: 1}}},
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(placed("on-east", "east"), placed("on-west", "west")).
		WithIndex(&dbfleetv1alpha1.DatabaseCluster{}, placedOnIndex, indexPlacedOn).
		WithIndex(&dbfleetv1alpha1.DatabaseCluster{}, unscheduledIndex, indexUnscheduled).Build()
	r := &Reconciler{Client: c}
	h := r.memberClusterHandler()
	ctx := context.Background()
	// Distinct resource versions: controller-runtime queues an update without one at low
	// priority, as a resync.
	version := 0
	cluster := func(ready metav1.ConditionStatus) *dbfleetv1alpha1.MemberCluster {
		version++
		return &dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "east", ResourceVersion: strconv.Itoa(version)},
			Status: dbfleetv1alpha1.MemberClusterStatus{Conditions: []metav1.Condition{{Type: dbfleetv1alpha1.ConditionReady, Status: ready}}}}
	}
	order := func(q priorityqueue.PriorityQueue[reconcile.Request]) []string {
		var names []string
		for q.Len() > 0 {
			item, _, _ := q.GetWithPriority()
			names = append(names, item.Name)
			q.Done(item)
		}
		return names
	}

	q := priorityqueue.New[reconcile.Request]("returns")
	defer q.ShutDown()
	h.Update(ctx, event.UpdateEvent{ObjectOld: cluster(metav1.ConditionUnknown), ObjectNew: cluster(metav1.ConditionTrue)}, q)
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "new"}}) // created just after
	if got := order(q); !slices.Equal(got, []string{"new", "on-east", "on-west"}) && !slices.Equal(got, []string{"new", "on-west", "on-east"}) {
		t.Errorf("after a cluster came back the queue gave %v, want the new database first, then both others", got)
	}

	q2 := priorityqueue.New[reconcile.Request]("leaves")
	defer q2.ShutDown()
	q2.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "low"}})
	h.Update(ctx, event.UpdateEvent{ObjectOld: cluster(metav1.ConditionTrue), ObjectNew: cluster(metav1.ConditionUnknown)}, q2)
	if got := order(q2); !slices.Equal(got, []string{"on-east", "low"}) {
		t.Errorf("after a cluster went Unknown the queue gave %v, want [on-east low]", got)
	}
}
