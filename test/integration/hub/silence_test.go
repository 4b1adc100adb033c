package hub

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// A failover promotes only a standby of the membership the old primary reported, and only once it
// reports it has exchanged nothing with a primary for contract.PromotionSilence: until then the
// old primary may still be taking writes without its Lease (its failsafe), so the hub holds,
// says so on FailoverInProgress and in an Event, and does not raise the epoch.
func TestFailoverWaitsForTheTargetsSilence(t *testing.T) {
	f, dbc, old, survivor := newSilenceFixture(t)
	low, high := survivorPods(dbc, survivor)
	epoch := dbc.Status.Primary.Epoch
	mdbs := f.placedMemberDatabases("orders")
	reportPrimaryMembership(f, mdbs[old], dbc, low, high)
	silentFor := func(seconds int64) {
		in := []dbfleetv1alpha1.InstanceStatus{standbyAt(low, "0/5000000"), standbyAt(high, "0/5000000")}
		for i := range in {
			in[i].PrimarySilenceSeconds = ptr.To(seconds)
		}
		f.reportInstances(mdbs[survivor], in...)
	}
	silentFor(2)

	f.loseCluster(old, 1)
	held := f.waitDatabase("orders", "held for the target's silence", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForSilence)
	})
	if p := held.Status.Primary; p.Cluster != old || p.Epoch != epoch {
		t.Fatalf("primary %+v while held; want it kept on %s at epoch %d", p, old, epoch)
	}
	f.waitEvent("orders", dbfleetv1alpha1.ReasonWaitingForSilence, survivor+"/"+low, "exchanged WAL with a primary less than 13s ago")

	silentFor(int64(contract.PromotionSilence / time.Second))
	promoted := f.waitDatabase("orders", "promoted", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster == survivor
	})
	if p := promoted.Status.Primary; p.Epoch != epoch+1 || p.Pod != low {
		t.Errorf("primary %+v, want %s on %s at epoch %d", p, low, survivor, epoch+1)
	}
}

// A standby the old primary never listed proves nothing by its silence: the hub does not promote
// it, however long it has been silent.
func TestFailoverDoesNotPromoteAStandbyOutsideTheOldPrimarysMembership(t *testing.T) {
	f, dbc, old, survivor := newSilenceFixture(t)
	low, high := survivorPods(dbc, survivor)
	epoch := dbc.Status.Primary.Epoch
	mdbs := f.placedMemberDatabases("orders")
	// It acknowledged only its own sibling: the survivor's pods came after it was cut off.
	sibling := fmt.Sprintf("orders-%d", startOf(dbc, old)+1)
	reportPrimaryMembership(f, mdbs[old], dbc, sibling)
	f.reportInstances(mdbs[survivor], standbyAt(low, "0/5000000"), standbyAt(high, "0/5000000"))

	f.loseCluster(old, 1)
	held := f.waitDatabase("orders", "held", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForSilence)
	})
	c := meta.FindStatusCondition(held.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
	if !strings.Contains(c.Message, "is not among the standbys the old primary") || held.Status.Primary.Epoch != epoch {
		t.Errorf("FailoverInProgress %q, primary %+v; want a hold naming the membership, epoch %d kept", c.Message, held.Status.Primary, epoch)
	}
}

// newSilenceFixture places "orders" as two shares of two replicas (twoShareDatabase) under a
// running hub.
func newSilenceFixture(t *testing.T) (f *fixture, dbc *dbfleetv1alpha1.DatabaseCluster, old, survivor string) {
	f = newFixture(t)
	startHub(t)
	dbc, old, survivor = twoShareDatabase(f, nil)
	return f, dbc, old, survivor
}

// survivorPods are the two pods of the survivor's share.
func survivorPods(dbc *dbfleetv1alpha1.DatabaseCluster, survivor string) (low, high string) {
	start := startOf(dbc, survivor)
	return fmt.Sprintf("orders-%d", start), fmt.Sprintf("orders-%d", start+1)
}

// reportPrimaryMembership reports the primary running at its epoch and answering to members.
func reportPrimaryMembership(f *fixture, mdb *dbfleetv1alpha1.MemberDatabase, dbc *dbfleetv1alpha1.DatabaseCluster, members ...string) {
	f.t.Helper()
	epoch := dbc.Status.Primary.Epoch
	f.reportInstances(mdb, dbfleetv1alpha1.InstanceStatus{Pod: dbc.Status.Primary.Pod, Role: dbfleetv1alpha1.InstanceRunningPrimary,
		Epoch: epoch, PromotedEpoch: epoch, ReceivedLSN: "0/5000000", ReplayedLSN: "0/5000000", Ready: true,
		Failsafe: &dbfleetv1alpha1.InstanceFailsafe{Members: members}})
}
