package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

func leaseNamespace(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("lease-%d", seq.Add(1))
	if err := east.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

func getLease(t *testing.T, ns, db string) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := east.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: contract.PrimaryLeaseName(db)}, l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The member-local primary Lease, written to a real API server: it never outlives fenceAfter
// (whole seconds, rounded down), keeps its acquire time while the same holder renews, restarts it
// for a new holder, and never goes back in time.
func TestPrimaryLeaseRenewal(t *testing.T) {
	ctx := context.Background()
	ns, db := leaseNamespace(t), "orders"
	t0 := time.Now().Truncate(time.Microsecond) // a Lease keeps microseconds
	labels := map[string]string{"dbfleet.io/database": db}

	if err := fence.RenewPrimaryLease(ctx, east.Client, ns, db, contract.Holder(clusterName, 1), t0, 15900*time.Millisecond, labels); err != nil {
		t.Fatal(err)
	}
	l := getLease(t, ns, db)
	if l == nil || *l.Spec.HolderIdentity != "east/1" || *l.Spec.LeaseDurationSeconds != 15 ||
		!l.Spec.RenewTime.Time.Equal(t0) || !l.Spec.AcquireTime.Time.Equal(t0) || l.Labels["dbfleet.io/database"] != db {
		t.Fatalf("created Lease %+v, want east/1 for 15 s (15.9 s rounded down) from %s", l, t0)
	}

	t1 := t0.Add(5 * time.Second)
	if err := fence.RenewPrimaryLease(ctx, east.Client, ns, db, contract.Holder(clusterName, 1), t1, 15*time.Second, labels); err != nil {
		t.Fatal(err)
	}
	l = getLease(t, ns, db)
	if !l.Spec.RenewTime.Time.Equal(t1) || !l.Spec.AcquireTime.Time.Equal(t0) {
		t.Errorf("renewed Lease renew %s acquire %s, want renew %s and the first acquire %s", l.Spec.RenewTime, l.Spec.AcquireTime, t1, t0)
	}

	// An older renewal changes nothing (not even the resourceVersion).
	rv := l.ResourceVersion
	if err := fence.RenewPrimaryLease(ctx, east.Client, ns, db, contract.Holder(clusterName, 1), t0, 15*time.Second, labels); err != nil {
		t.Fatal(err)
	}
	if l = getLease(t, ns, db); l.ResourceVersion != rv || !l.Spec.RenewTime.Time.Equal(t1) {
		t.Errorf("an older renewal rewrote the Lease: renew %s, resourceVersion %s -> %s", l.Spec.RenewTime, rv, l.ResourceVersion)
	}

	// A new epoch is a new holder: acquired anew.
	t2 := t1.Add(time.Second)
	if err := fence.RenewPrimaryLease(ctx, east.Client, ns, db, contract.Holder(clusterName, 2), t2, 15*time.Second, labels); err != nil {
		t.Fatal(err)
	}
	if l = getLease(t, ns, db); *l.Spec.HolderIdentity != "east/2" || !l.Spec.AcquireTime.Time.Equal(t2) {
		t.Errorf("new holder's Lease %s acquired %s, want east/2 acquired %s", *l.Spec.HolderIdentity, l.Spec.AcquireTime, t2)
	}
}

// A fenceAfter under a second would be a Lease of 0 s, which the API server refuses: the agent
// refuses it first, and writes nothing.
func TestSubSecondPrimaryLeaseIsRefused(t *testing.T) {
	ctx := context.Background()
	ns, db := leaseNamespace(t), "orders"
	zero := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "zero"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x"), LeaseDurationSeconds: ptr.To[int32](0)}}
	if err := east.Client.Create(ctx, zero); !apierrors.IsInvalid(err) {
		t.Fatalf("the API server took a 0 s Lease (%v): the premise of this test is gone", err)
	}
	err := fence.RenewPrimaryLease(ctx, east.Client, ns, db, contract.Holder(clusterName, 1), time.Now(), 900*time.Millisecond, nil)
	if err == nil {
		t.Fatal("a 900ms primary Lease was accepted")
	}
	if l := getLease(t, ns, db); l != nil {
		t.Errorf("a Lease was written: %+v", l.Spec)
	}
}

// ReleasePrimaryLease deletes the Lease only when this cluster holds it at a lower epoch: never
// another cluster's, never the current or a newer epoch's, never a holder it cannot read.
func TestReleasePrimaryLease(t *testing.T) {
	ctx := context.Background()
	ns, db := leaseNamespace(t), "orders"
	hold := func(holder string) {
		t.Helper()
		if l := getLease(t, ns, db); l != nil {
			if err := east.Client.Delete(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		if err := fence.RenewPrimaryLease(ctx, east.Client, ns, db, holder, time.Now(), 15*time.Second, nil); err != nil {
			t.Fatal(err)
		}
	}
	release := func(cluster string, epoch int64) {
		t.Helper()
		if err := fence.ReleasePrimaryLease(ctx, east.Client, ns, db, cluster, epoch); err != nil {
			t.Fatal(err)
		}
	}

	if err := fence.ReleasePrimaryLease(ctx, east.Client, ns, db, clusterName, 2); err != nil {
		t.Errorf("releasing a missing Lease: %v", err)
	}
	for _, tc := range []struct {
		name, holder string
		cluster      string
		epoch        int64
		kept         bool
	}{
		{"own Lease at a lower epoch", "east/3", clusterName, 4, false},
		{"own Lease at the same epoch", "east/3", clusterName, 3, true},
		{"own Lease at a newer epoch", "east/3", clusterName, 2, true},
		{"another cluster's Lease", "west/3", clusterName, 4, true},
		{"a cluster whose name this one's starts with", "east-2/3", clusterName, 4, true},
		{"a holder it cannot read", "east", clusterName, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hold(tc.holder)
			release(tc.cluster, tc.epoch)
			if kept := getLease(t, ns, db) != nil; kept != tc.kept {
				t.Errorf("Lease held by %s released by %s at epoch %d: kept %v, want %v", tc.holder, tc.cluster, tc.epoch, kept, tc.kept)
			}
		})
	}
}
