package member

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

// A pass that reads the MemberDatabase from a cache still behind the agent's own status write
// reports nothing new: the status it computes is the one already written. Once the cache shows
// the write, a real change (the StatefulSet became Ready) is reported, as a patch against what the
// hub has.
func TestACacheBehindOurOwnReportIsNotReportedAgain(t *testing.T) {
	ctx := context.Background()
	mdb := &dbfleetv1alpha1.MemberDatabase{
		ObjectMeta: metav1.ObjectMeta{Namespace: "member-east", Name: "shop.orders", Generation: 1},
		Spec: dbfleetv1alpha1.MemberDatabaseSpec{Replicas: 3, Role: dbfleetv1alpha1.RolePrimary, Epoch: 1,
			DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: "orders"}},
	}
	patches := 0
	hub := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(mdb).
		WithStatusSubresource(&dbfleetv1alpha1.MemberDatabase{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				patches++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	cached := &dbfleetv1alpha1.MemberDatabase{}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(mdb), cached); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{}
	pass := func(from *dbfleetv1alpha1.MemberDatabase, sts *appsv1.StatefulSet) {
		t.Helper()
		m := from.DeepCopy()
		r.reported.catchUp(m)
		before := m.DeepCopy()
		setStatus(m, passResult{sts: sts, atEpoch: true}, false)
		if err := r.writeStatus(ctx, hub, before, m); err != nil {
			t.Fatal(err)
		}
	}
	created := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}}

	pass(cached, created) // applied, 0/3 ready
	if patches != 1 {
		t.Fatalf("%d status patches after the first pass, want 1", patches)
	}
	pass(cached, created) // the cache still shows the MemberDatabase without that report
	if patches != 1 {
		t.Fatalf("%d status patches after a pass over a cache behind the report, want still 1", patches)
	}

	// The StatefulSet becomes Ready while the cache is still behind: that is news.
	ready := created.DeepCopy()
	ready.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3}
	pass(cached, ready)
	if patches != 2 {
		t.Fatalf("%d status patches after the StatefulSet became Ready, want 2", patches)
	}
	got := &dbfleetv1alpha1.MemberDatabase{}
	if err := hub.Get(ctx, client.ObjectKeyFromObject(mdb), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ReadyReplicas != 3 || got.Status.Epoch != 1 || got.Status.ObservedGeneration != 1 {
		t.Errorf("the hub has status %+v, want 3 ready at epoch 1, generation 1", got.Status)
	}

	// The cache catches up: the remembered report is forgotten and nothing is written again.
	pass(got, ready)
	if patches != 2 {
		t.Errorf("%d status patches once the cache caught up, want still 2", patches)
	}
	if r.reported.last.Behind(client.ObjectKeyFromObject(mdb), "1") { // still remembered: any older copy is behind
		t.Error("the report is still remembered after the cache showed it")
	}
}

// A new share's first report waits up to firstReportHold for the StatefulSet to become ready, so
// that one write says "applied" and "ready"; a ready, failed or fenced share, or any later
// report, is never held.
func TestAFirstReportWaitsBrieflyForReadiness(t *testing.T) {
	r := &Reconciler{}
	share := &shareState{}
	fresh := &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "member-east", Name: "shop.orders", Generation: 1},
		Spec: dbfleetv1alpha1.MemberDatabaseSpec{Replicas: 1}}
	applied := fresh.DeepCopy()
	setStatus(applied, passResult{sts: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1}}, atEpoch: true}, false)
	ready := fresh.DeepCopy()
	setStatus(ready, passResult{sts: &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Generation: 1},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1}}, atEpoch: true}, false)
	if !meta.IsStatusConditionTrue(ready.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) {
		t.Fatalf("test setup: the ready share is not Available: %+v", ready.Status)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

	if wait := r.holdFirstReport(share, fresh, applied, false, t0); wait != firstReportHold {
		t.Errorf("first pass: hold %s, want %s", wait, firstReportHold)
	}
	if wait := r.holdFirstReport(share, fresh, applied, false, t0.Add(time.Second)); wait != firstReportHold-time.Second {
		t.Errorf("a second later: hold %s, want the rest, %s", wait, firstReportHold-time.Second)
	}
	if wait := r.holdFirstReport(share, fresh, applied, false, t0.Add(firstReportHold)); wait != 0 {
		t.Errorf("after the hold: hold %s, want 0 (report applied, not ready)", wait)
	}
	if wait := r.holdFirstReport(share, fresh, ready, false, t0); wait != 0 {
		t.Errorf("ready at once: hold %s, want 0", wait)
	}
	if wait := r.holdFirstReport(share, fresh, applied, true, t0); wait != 0 {
		t.Errorf("failed or fenced: hold %s, want 0", wait)
	}
	if wait := r.holdFirstReport(share, applied, applied, false, t0); wait != 0 {
		t.Errorf("a later report: hold %s, want 0", wait)
	}
	if !share.unreportedSince.IsZero() {
		t.Error("a reported share is still remembered as unreported")
	}
}
