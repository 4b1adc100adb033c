package hub

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// reportPrimaryLost reports, as the primary share's agent would, that its primary pod stopped
// serving and its Lease ran out: the pod unread, the share fenced at the epoch (PrimaryLost), the
// other pods as given.
func reportPrimaryLost(f *fixture, mdb *dbfleetv1alpha1.MemberDatabase, dbc *dbfleetv1alpha1.DatabaseCluster, others ...dbfleetv1alpha1.InstanceStatus) {
	f.t.Helper()
	f.reportInstances(mdb, append([]dbfleetv1alpha1.InstanceStatus{{Pod: dbc.Status.Primary.Pod, Role: dbfleetv1alpha1.InstanceUnknown,
		Message: "connection refused"}}, others...)...)
	fresh := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(mdb), fresh); err != nil {
		f.t.Fatal(err)
	}
	before := fresh.DeepCopy()
	fresh.Status.Epoch, fresh.Status.ObservedGeneration = fresh.Spec.Epoch, fresh.Generation
	meta.SetStatusCondition(&fresh.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionFenced, Status: metav1.ConditionTrue,
		Reason: dbfleetv1alpha1.ReasonPrimaryLost, Message: "the primary pod has not served for 10s"})
	if err := f.c.Status().Patch(f.ctx, fresh, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// A primary pod lost inside a healthy cluster is replaced by the other pod of its own share, the
// most advanced standby, at the next epoch: the cluster keeps the primary, the share's
// spec.primaryOrdinal names the new pod, and an Event says so.
func TestALostPrimaryPodIsReplacedInItsOwnShare(t *testing.T) {
	f, dbc, old, survivor := newSilenceFixture(t)
	epoch := dbc.Status.Primary.Epoch
	sibling := fmt.Sprintf("orders-%d", startOf(dbc, old)+1)
	low, high := survivorPods(dbc, survivor)
	mdbs := f.placedMemberDatabases("orders")
	f.reportInstances(mdbs[survivor], standbyAt(low, "0/5000000"), standbyAt(high, "0/5000000"))
	reportPrimaryLost(f, mdbs[old], dbc, standbyAt(sibling, "0/5000100"))

	got := f.waitDatabase("orders", "a new primary pod", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Epoch > epoch
	})
	if p := got.Status.Primary; p.Cluster != old || p.Pod != sibling || p.Epoch != epoch+1 {
		t.Fatalf("primary %+v, want %s on %s at epoch %d", *p, sibling, old, epoch+1)
	}
	f.waitEvent("orders", "PrimaryPodReplaced", sibling, dbc.Status.Primary.Pod)
	f.eventually("the share's primaryOrdinal names "+sibling, func() bool {
		m := f.placedMemberDatabases("orders")[old]
		return m.Spec.Epoch == epoch+1 && m.Spec.Role == dbfleetv1alpha1.RolePrimary && m.Spec.PrimaryOrdinal != nil &&
			fmt.Sprintf("orders-%d", *m.Spec.PrimaryOrdinal) == sibling
	})
}

// With no standby in its own share as far as another cluster's, a lost primary pod moves the
// primary to that cluster, though its own cluster is Ready: the failover's steps (no demotion,
// no final LSN to wait for), the old share a replica at the next epoch.
func TestALostPrimaryPodMovesToAnotherClusterAhead(t *testing.T) {
	f, dbc, old, survivor := newSilenceFixture(t)
	epoch := dbc.Status.Primary.Epoch
	sibling := fmt.Sprintf("orders-%d", startOf(dbc, old)+1)
	low, high := survivorPods(dbc, survivor)
	mdbs := f.placedMemberDatabases("orders")
	f.reportInstances(mdbs[survivor], standbyAt(low, "0/5000000"), standbyAt(high, "0/7000000"))
	reportPrimaryLost(f, mdbs[old], dbc, standbyAt(sibling, "0/5000000"))

	got := f.waitDatabase("orders", "the primary moved", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Epoch > epoch
	})
	if p := got.Status.Primary; p.Cluster != survivor || p.Pod != high || p.Epoch != epoch+1 {
		t.Fatalf("primary %+v, want %s on %s at epoch %d", *p, high, survivor, epoch+1)
	}
	f.eventually("the old share a replica at the new epoch", func() bool {
		m := f.placedMemberDatabases("orders")[old]
		return m != nil && m.Spec.Role == dbfleetv1alpha1.RoleReplica && m.Spec.Epoch == epoch+1
	})
}
