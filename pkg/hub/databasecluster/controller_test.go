package databasecluster

import (
	"context"
	"testing"

	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

// A reconcile that reads the DatabaseCluster from a cache still behind the hub's own status
// write must not place the database again: no second Scheduled Event, no second status write,
// no MemberDatabase writes. Once the cache shows the write, reconciles go on as usual.
func TestACacheBehindOurOwnWriteIsNotActedOn(t *testing.T) {
	var objs []client.Object
	for _, mc := range fleet("east", "west") {
		objs = append(objs, mc)
	}
	pp := staticPolicy(map[string]int64{"east": 1, "west": 1}, nil)[0]
	objs = append(objs, &pp, newDB(2))

	var stale *dbfleetv1alpha1.DatabaseCluster     // what the lagging cache shows, when set
	var finalized *dbfleetv1alpha1.DatabaseCluster // the object as the finalizer patch left it
	writes := 0
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(objs...).
		WithStatusSubresource(&dbfleetv1alpha1.DatabaseCluster{}, &dbfleetv1alpha1.MemberDatabase{}).
		WithIndex(&dbfleetv1alpha1.MemberDatabase{}, databaseRefIndex, indexDatabaseRef).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if dbc, ok := obj.(*dbfleetv1alpha1.DatabaseCluster); ok && stale != nil {
					stale.DeepCopyInto(dbc)
					return nil
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				writes++
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				writes++
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				writes++
				err := c.Patch(ctx, obj, patch, opts...)
				if dbc, ok := obj.(*dbfleetv1alpha1.DatabaseCluster); ok {
					finalized = dbc.DeepCopy()
				}
				return err
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				writes++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Recorder: recorder, Clock: clocktesting.NewFakePassiveClock(t0)}
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "db"}}

	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	if got := len(recorder.Events); got != 1 {
		t.Fatalf("first reconcile recorded %d Events, want 1 (Scheduled)", got)
	}
	<-recorder.Events
	// Finalizer, two MemberDatabases, status.
	if writes != 4 {
		t.Fatalf("first reconcile made %d writes, want 4", writes)
	}

	writes = 0
	// The cache has the finalizer patch but not yet the status patch that followed it.
	stale = finalized
	res, err := r.Reconcile(ctx, req)
	if err != nil {
		t.Fatalf("reconcile on the lagging cache: %v", err)
	}
	if writes != 0 || len(recorder.Events) != 0 {
		t.Errorf("reconcile on a cache behind our own write made %d writes and %d Events, want none", writes, len(recorder.Events))
	}
	if res.RequeueAfter == 0 {
		t.Error("reconcile on a cache behind our own write did not ask to look again")
	}

	stale = nil // caught up
	writes = 0
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("reconcile on the caught-up cache: %v", err)
	}
	if writes != 0 || len(recorder.Events) != 0 {
		t.Errorf("reconcile with nothing to do made %d writes and %d Events", writes, len(recorder.Events))
	}
	got := &dbfleetv1alpha1.DatabaseCluster{}
	if err := c.Get(ctx, req.NamespacedName, got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Placements) != 2 {
		t.Errorf("placements %v, want both clusters", got.Status.Placements)
	}
}
