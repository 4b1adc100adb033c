package databasecluster

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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

// recordingQueue records how each request was added (priority and delay).
type recordingQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request] // only AddWithOpts is called
	added                                          map[string]priorityqueue.AddOpts
}

func (q *recordingQueue) AddWithOpts(o priorityqueue.AddOpts, reqs ...reconcile.Request) {
	for _, r := range reqs {
		q.added[r.Name] = o
	}
}

// A share's first report (applied at its first epoch, not yet ready) waits progressBatch at the
// default priority, so that its ready report, urgent and batched for only reportBatch, usually
// takes it along in one status write; the acknowledgement of a later epoch (a demotion) stays
// urgent.
func TestAFirstReportWaitsForTheReadyOne(t *testing.T) {
	q := &recordingQueue{added: map[string]priorityqueue.AddOpts{}}
	mdb := func(db, rv string, epoch int64, available metav1.ConditionStatus) *dbfleetv1alpha1.MemberDatabase {
		m := &dbfleetv1alpha1.MemberDatabase{
			ObjectMeta: metav1.ObjectMeta{Namespace: "member-east", Name: "shop-" + db, ResourceVersion: rv},
			Spec:       dbfleetv1alpha1.MemberDatabaseSpec{DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: db}},
			Status:     dbfleetv1alpha1.MemberDatabaseStatus{Epoch: epoch},
		}
		if available != "" {
			m.Status.Conditions = []metav1.Condition{{Type: dbfleetv1alpha1.ConditionAvailable, Status: available}}
		}
		return m
	}
	h := memberDatabaseEvents()
	ctx := context.Background()
	h.Update(ctx, event.UpdateEvent{ObjectOld: mdb("applied", "1", 0, ""), ObjectNew: mdb("applied", "2", 1, metav1.ConditionFalse)}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: mdb("ready", "2", 1, metav1.ConditionFalse), ObjectNew: mdb("ready", "3", 1, metav1.ConditionTrue)}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: mdb("demoted", "5", 1, metav1.ConditionTrue), ObjectNew: mdb("demoted", "6", 2, metav1.ConditionTrue)}, q)

	for name, want := range map[string]priorityqueue.AddOpts{
		"applied": {After: progressBatch, Priority: ptr.To(0)},
		"ready":   {After: reportBatch, Priority: ptr.To(availabilityPriority)},
		"demoted": {After: reportBatch, Priority: ptr.To(availabilityPriority)},
	} {
		got, ok := q.added[name]
		if !ok {
			t.Errorf("%s: not enqueued", name)
			continue
		}
		if got.After != want.After || ptr.Deref(got.Priority, -1) != *want.Priority {
			t.Errorf("%s: enqueued after %s at priority %d, want after %s at priority %d",
				name, got.After, ptr.Deref(got.Priority, -1), want.After, *want.Priority)
		}
	}
}

// Reports that change whether the database has a working primary jump the queue: availability,
// fencing, an acknowledged epoch, and a share's read-write endpoint, which the other shares'
// standbys must follow; a ready count alone does not.
func TestUrgentReport(t *testing.T) {
	base := &dbfleetv1alpha1.MemberDatabase{}
	base.Status.Epoch = 2
	with := func(change func(*dbfleetv1alpha1.MemberDatabase)) *dbfleetv1alpha1.MemberDatabase {
		m := base.DeepCopy()
		change(m)
		return m
	}
	for _, tc := range []struct {
		name string
		cur  *dbfleetv1alpha1.MemberDatabase
		want bool
	}{
		{"ready count", with(func(m *dbfleetv1alpha1.MemberDatabase) { m.Status.ReadyReplicas = 1 }), false},
		{"available", with(func(m *dbfleetv1alpha1.MemberDatabase) {
			m.Status.Conditions = []metav1.Condition{{Type: dbfleetv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue}}
		}), true},
		{"epoch acknowledged", with(func(m *dbfleetv1alpha1.MemberDatabase) { m.Status.Epoch = 3 }), true},
		{"read-write endpoint", with(func(m *dbfleetv1alpha1.MemberDatabase) {
			m.Status.Endpoints = &dbfleetv1alpha1.DatabaseEndpoints{ReadWrite: "10.200.1.3:5432"}
		}), true},
		{"read-only endpoints", with(func(m *dbfleetv1alpha1.MemberDatabase) {
			m.Status.Endpoints = &dbfleetv1alpha1.DatabaseEndpoints{ReadOnly: []string{"10.200.1.4:5432"}}
		}), false},
	} {
		if got := urgentReport(base, tc.cur); got != tc.want {
			t.Errorf("%s: urgent %t, want %t", tc.name, got, tc.want)
		}
	}
}
