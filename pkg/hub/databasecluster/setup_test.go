package databasecluster

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// A share that became Available jumps the queue of databases waiting to be placed; another
// report (applied, not yet ready) waits its turn, and a resync comes last.
func TestAvailabilityReportsAreReconciledBeforeNewDatabases(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	waiting := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "new"}}
	q.Add(waiting) // a database just created, not yet placed

	mdb := func(db, rv string, available metav1.ConditionStatus) *dbfleetv1alpha1.MemberDatabase {
		m := &dbfleetv1alpha1.MemberDatabase{
			ObjectMeta: metav1.ObjectMeta{Namespace: "member-east", Name: "shop-" + db, ResourceVersion: rv},
			Spec:       dbfleetv1alpha1.MemberDatabaseSpec{DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: db}},
		}
		if available != "" {
			m.Status.Conditions = []metav1.Condition{{Type: dbfleetv1alpha1.ConditionAvailable, Status: available}}
		}
		return m
	}
	h := memberDatabaseEvents()
	ctx := context.Background()
	h.Update(ctx, event.UpdateEvent{ObjectOld: mdb("resynced", "7", metav1.ConditionTrue), ObjectNew: mdb("resynced", "7", metav1.ConditionTrue)}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: mdb("applied", "1", ""), ObjectNew: mdb("applied", "2", metav1.ConditionFalse)}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: mdb("ready", "1", metav1.ConditionFalse), ObjectNew: mdb("ready", "2", metav1.ConditionTrue)}, q)
	// A primary fenced (still Available as far as its replicas go): the hub must hand out a new
	// epoch, as urgently as an availability change.
	notFenced, fenced := mdb("fenced", "1", metav1.ConditionTrue), mdb("fenced", "2", metav1.ConditionTrue)
	fenced.Status.Conditions = append(fenced.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionFenced, Status: metav1.ConditionTrue})
	h.Update(ctx, event.UpdateEvent{ObjectOld: notFenced, ObjectNew: fenced}, q)

	// Reports wait reportBatch for their siblings, then go by priority.
	deadline := time.Now().Add(10 * time.Second)
	for q.Len() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 5 items ready after 10s", q.Len())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, want := range []string{"ready", "fenced", "new", "applied", "resynced"} {
		item, _, _ := q.GetWithPriority()
		if item.Name != want {
			t.Fatalf("item %d off the queue is %s, want %s", i, item.Name, want)
		}
		q.Done(item)
	}
}
