package databasecluster

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// An agent's report on a placed database's share jumps the queue of databases waiting to be
// placed; a resync does not.
func TestAgentReportsAreReconciledBeforeNewDatabases(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	waiting := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "new"}}
	q.Add(waiting) // a database just created, not yet placed

	mdb := func(db, rv string) *dbfleetv1alpha1.MemberDatabase {
		return &dbfleetv1alpha1.MemberDatabase{
			ObjectMeta: metav1.ObjectMeta{Namespace: "member-east", Name: "shop-" + db, ResourceVersion: rv},
			Spec:       dbfleetv1alpha1.MemberDatabaseSpec{DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: db}},
		}
	}
	h := memberDatabaseEvents()
	ctx := context.Background()
	h.Update(ctx, event.UpdateEvent{ObjectOld: mdb("resynced", "7"), ObjectNew: mdb("resynced", "7")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: mdb("placed", "1"), ObjectNew: mdb("placed", "2")}, q)

	for i, want := range []string{"placed", "new", "resynced"} {
		item, _, _ := q.GetWithPriority()
		if item.Name != want {
			t.Fatalf("item %d off the queue is %s, want %s", i, item.Name, want)
		}
		q.Done(item)
	}
}
