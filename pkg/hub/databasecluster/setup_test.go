package databasecluster

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheme"
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
	h := memberDatabaseEvents(nil)
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
	h := memberDatabaseEvents(nil)
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
// fencing, an acknowledged epoch, a share's read-write endpoint, which the other shares'
// standbys must follow, and the version a share runs, which a version roll waits for; a ready
// count alone does not.
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
		{"a demoted instance's final LSN", with(func(m *dbfleetv1alpha1.MemberDatabase) {
			m.Status.Instances = []dbfleetv1alpha1.InstanceStatus{{Pod: "orders-0", Demoted: &dbfleetv1alpha1.InstanceDemotion{Epoch: 2, FinalLSN: "0/5000028"}}}
		}), true},
		{"a new version run", with(func(m *dbfleetv1alpha1.MemberDatabase) { m.Status.Version = "16.5" }), true},
		{"read-only endpoints", with(func(m *dbfleetv1alpha1.MemberDatabase) {
			m.Status.Endpoints = &dbfleetv1alpha1.DatabaseEndpoints{ReadOnly: []string{"10.200.1.4:5432"}}
		}), false},
	} {
		if got := urgentReport(base, tc.cur); got != tc.want {
			t.Errorf("%s: urgent %t, want %t", tc.name, got, tc.want)
		}
	}
}

// observedShare is a MemberDatabase of database shop/orders in cluster's namespace, at generation 2,
// that has reported on generation observed and is Available or not.
func observedShare(cluster string, observed int64, available bool) *dbfleetv1alpha1.MemberDatabase {
	m := &dbfleetv1alpha1.MemberDatabase{
		ObjectMeta: metav1.ObjectMeta{Namespace: "member-" + cluster, Name: "shop-orders", Generation: 2, ResourceVersion: "10"},
		Spec:       dbfleetv1alpha1.MemberDatabaseSpec{DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: "orders"}},
		Status:     dbfleetv1alpha1.MemberDatabaseStatus{ObservedGeneration: observed},
	}
	status := metav1.ConditionFalse
	if available {
		status = metav1.ConditionTrue
	}
	m.Status.Conditions = []metav1.Condition{{Type: dbfleetv1alpha1.ConditionAvailable, Status: status}}
	return m
}

// An urgent report waits reportBatch only while some share of its database has yet to report
// Available on its current spec; the report that leaves none goes at once.
func TestReportDelay(t *testing.T) {
	deleting := observedShare("central", 2, true)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for _, tc := range []struct {
		name   string
		cur    *dbfleetv1alpha1.MemberDatabase
		shares []*dbfleetv1alpha1.MemberDatabase
		want   time.Duration
	}{
		{"the only share, Available", observedShare("east", 2, true), nil, 0},
		{"the only share, its own entry in the list", observedShare("east", 2, true), []*dbfleetv1alpha1.MemberDatabase{observedShare("east", 1, false)}, 0},
		{"the last of three", observedShare("east", 2, true), []*dbfleetv1alpha1.MemberDatabase{observedShare("west", 2, true), observedShare("central", 2, true)}, 0},
		{"a sibling not Available yet", observedShare("east", 2, true), []*dbfleetv1alpha1.MemberDatabase{observedShare("west", 2, true), observedShare("central", 2, false)}, reportBatch},
		{"a sibling that has not seen its spec", observedShare("east", 2, true), []*dbfleetv1alpha1.MemberDatabase{observedShare("west", 1, true)}, reportBatch},
		{"a sibling going away", observedShare("east", 2, true), []*dbfleetv1alpha1.MemberDatabase{deleting}, reportBatch},
		{"the report itself not Available", observedShare("east", 2, false), []*dbfleetv1alpha1.MemberDatabase{observedShare("west", 2, true)}, reportBatch},
		{"the report itself on an older spec", observedShare("east", 1, true), []*dbfleetv1alpha1.MemberDatabase{observedShare("west", 2, true)}, reportBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var shares []dbfleetv1alpha1.MemberDatabase
			for _, s := range tc.shares {
				shares = append(shares, *s)
			}
			if got := reportDelay(tc.cur, shares); got != tc.want {
				t.Errorf("reportDelay = %s, want %s", got, tc.want)
			}
		})
	}
}

// The watch handler reads the database's shares from the cache (by the databaseRef index): the
// report completing a database of three is enqueued at once, one with a sibling still to come
// waits reportBatch, and so does one whose shares cannot be listed.
func TestTheReportCompletingADatabaseIsNotBatched(t *testing.T) {
	ready := func(cluster string) *dbfleetv1alpha1.MemberDatabase {
		m := observedShare(cluster, 2, true)
		m.ResourceVersion = "11"
		return m
	}
	for _, tc := range []struct {
		name   string
		others []client.Object
		list   error
		want   time.Duration
	}{
		{"the last share", []client.Object{observedShare("west", 2, true), observedShare("central", 2, true)}, nil, 0},
		{"a share still to come", []client.Object{observedShare("west", 2, true), observedShare("central", 1, false)}, nil, reportBatch},
		{"shares not listed", []client.Object{observedShare("west", 2, true), observedShare("central", 2, true)}, errors.New("cache not started"), reportBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]client.Object{ready("east")}, tc.others...)
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
				WithIndex(&dbfleetv1alpha1.MemberDatabase{}, databaseRefIndex, indexDatabaseRef).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if tc.list != nil {
						return tc.list
					}
					return c.List(ctx, list, opts...)
				}}).Build()
			r := &Reconciler{Client: c}
			q := &recordingQueue{added: map[string]priorityqueue.AddOpts{}}
			memberDatabaseEvents(r.sharesOf).Update(context.Background(), event.UpdateEvent{ObjectOld: observedShare("east", 1, false), ObjectNew: ready("east")}, q)
			got, ok := q.added["orders"]
			if !ok {
				t.Fatal("shop/orders not enqueued")
			}
			if got.After != tc.want || ptr.Deref(got.Priority, -1) != availabilityPriority {
				t.Errorf("enqueued after %s at priority %d, want after %s at priority %d", got.After, ptr.Deref(got.Priority, -1), tc.want, availabilityPriority)
			}
		})
	}
}

// What a primary handover waits on, a demoted primary's final LSN and a new read-write
// endpoint, is reconciled at once, however many shares are still to report; other urgent
// reports are batched.
func TestHandoverReportsAreNotBatched(t *testing.T) {
	before := observedShare("east", 2, false)
	before.Status.Epoch = 2
	with := func(rv string, change func(*dbfleetv1alpha1.MemberDatabase)) *dbfleetv1alpha1.MemberDatabase {
		m := before.DeepCopy()
		m.ResourceVersion = rv
		change(m)
		return m
	}
	for _, tc := range []struct {
		name string
		cur  *dbfleetv1alpha1.MemberDatabase
		want time.Duration
	}{
		{"final LSN", with("11", func(m *dbfleetv1alpha1.MemberDatabase) {
			m.Status.Instances = []dbfleetv1alpha1.InstanceStatus{{Pod: "orders-0", Demoted: &dbfleetv1alpha1.InstanceDemotion{Epoch: 1, FinalLSN: "0/5000028"}}}
		}), 0},
		{"new read-write endpoint", with("12", func(m *dbfleetv1alpha1.MemberDatabase) {
			m.Status.Endpoints = &dbfleetv1alpha1.DatabaseEndpoints{ReadWrite: "10.200.1.3:5432"}
		}), 0},
		{"epoch acknowledged", with("13", func(m *dbfleetv1alpha1.MemberDatabase) { m.Status.Epoch = 3 }), reportBatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &recordingQueue{added: map[string]priorityqueue.AddOpts{}}
			memberDatabaseEvents(nil).Update(context.Background(), event.UpdateEvent{ObjectOld: before, ObjectNew: tc.cur}, q)
			got, ok := q.added["orders"]
			if !ok {
				t.Fatal("shop/orders not enqueued")
			}
			if got.After != tc.want || ptr.Deref(got.Priority, -1) != availabilityPriority {
				t.Errorf("enqueued after %s at priority %d, want after %s at priority %d", got.After, ptr.Deref(got.Priority, -1), tc.want, availabilityPriority)
			}
		})
	}
}
