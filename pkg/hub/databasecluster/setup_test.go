package databasecluster

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"
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

	// The report waits reportBatch for its siblings, then goes first.
	deadline := time.Now().Add(10 * time.Second)
	for q.Len() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 items ready after 10s", q.Len())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, want := range []string{"placed", "new", "resynced"} {
		item, _, _ := q.GetWithPriority()
		if item.Name != want {
			t.Fatalf("item %d off the queue is %s, want %s", i, item.Name, want)
		}
		q.Done(item)
	}
}

// A database let through the eviction limit is not charged again when its reconcile is retried
// (its status write failed, say); another database still waits for the refill.
func TestEvictionGrantSurvivesARetry(t *testing.T) {
	r := &Reconciler{EvictionLimiter: rate.NewLimiter(rate.Every(100*time.Second), 1)}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	orders := types.NamespacedName{Namespace: "shop", Name: "orders"}
	payments := types.NamespacedName{Namespace: "shop", Name: "payments"}
	if wait := r.evictionDelay(orders, 1, now); wait != 0 {
		t.Fatalf("first eviction waits %s, want 0 (a full bucket)", wait)
	}
	if wait := r.evictionDelay(orders, 1, now.Add(time.Second)); wait != 0 {
		t.Errorf("the retry of a granted eviction waits %s, want 0", wait)
	}
	if wait := r.evictionDelay(payments, 1, now.Add(time.Second)); wait <= 0 {
		t.Errorf("another database's eviction goes ahead with an empty bucket, want a wait")
	}
	if wait := r.evictionDelay(orders, 1, now.Add(evictionGrantTTL+time.Second)); wait <= 0 {
		t.Errorf("a grant older than %s still lets orders through, want a wait", evictionGrantTTL)
	}
}
