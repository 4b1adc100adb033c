package hub

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// twoShareDatabase places "orders" as two shares of two replicas on two clusters, reports them
// ready and returns the database, the primary's cluster and the survivor's.
func twoShareDatabase(f *fixture, change func(*dbfleetv1alpha1.DatabaseCluster)) (dbc *dbfleetv1alpha1.DatabaseCluster, old, survivor string) {
	f.t.Helper()
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	failoverPolicy(f, 1)
	f.database("orders", 4, map[string]string{"app": "orders"})
	if change != nil {
		f.updateDatabase("orders", change)
	}
	dbc = f.waitDatabase("orders", "two replicas on each", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return shares(d)[a] == 2 && shares(d)[b] == 2
	})
	f.waitMemberDatabases("orders", shares(dbc))
	reportReady(f, "orders")
	dbc = f.waitDatabase("orders", "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
	old, survivor = dbc.Status.Primary.Cluster, a
	if old == a {
		survivor = b
	}
	return dbc, old, survivor
}

func startOf(dbc *dbfleetv1alpha1.DatabaseCluster, cluster string) int32 {
	for _, p := range dbc.Status.Placements {
		if p.Cluster == cluster {
			return p.Ordinals.Start
		}
	}
	return -1
}

func standbyAt(pod, lsn string) dbfleetv1alpha1.InstanceStatus {
	return dbfleetv1alpha1.InstanceStatus{Pod: pod, Role: dbfleetv1alpha1.InstanceRunningStandby, ReceivedLSN: lsn, ReplayedLSN: lsn, Ready: true}
}

// The primary's cluster is lost and the survivor's share has two instances, the higher ordinal
// further in the WAL: that pod, not the lowest ordinal, becomes the primary pod (status and the
// share's spec.primaryOrdinal), and the condition and the Event say which LSNs were compared.
func TestFailoverPromotesTheSharesMostAdvancedPod(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	dbc, old, survivor := twoShareDatabase(f, nil)
	if got, want := dbc.Status.Primary.Pod, fmt.Sprintf("orders-%d", startOf(dbc, old)); got != want {
		t.Errorf("first primary on pod %q, want %s, the lowest ordinal of its share", got, want)
	}
	start := startOf(dbc, survivor)
	low, high := fmt.Sprintf("orders-%d", start), fmt.Sprintf("orders-%d", start+1)
	mdbs := f.placedMemberDatabases("orders")
	f.reportInstances(mdbs[survivor], standbyAt(low, "0/5000000"), standbyAt(high, "0/7000000"))

	f.loseCluster(old, 1)
	promoted := f.waitDatabase("orders", "promoted", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster == survivor
	})
	if promoted.Status.Primary.Pod != high {
		t.Errorf("primary pod %q, want %s, whose instance received 0/7000000 (%s received 0/5000000)", promoted.Status.Primary.Pod, high, low)
	}
	c := meta.FindStatusCondition(promoted.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
	compared := []string{high, survivor + "/" + high + " received 0/7000000 replayed 0/7000000", survivor + "/" + low + " received 0/5000000 replayed 0/5000000"}
	if c == nil || c.Reason != dbfleetv1alpha1.ReasonPromoted || !containsAll(c.Message, compared...) {
		t.Errorf("FailoverInProgress %+v, want Promoted naming %q", c, compared)
	}
	f.waitEvent("orders", "PrimaryChanged", compared...)
	m := f.waitMemberDatabases("orders", shares(promoted))[survivor]
	if m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.PrimaryOrdinal == nil || *m.Spec.PrimaryOrdinal != start+1 {
		t.Errorf("survivor's share: role %s, primaryOrdinal %v, want primary at %d", m.Spec.Role, m.Spec.PrimaryOrdinal, start+1)
	}

	// The pod stays for the epoch: its sibling pulling ahead later changes nothing. It is
	// ready once its instance runs as primary at the new epoch.
	promotedHigh := standbyAt(high, "0/7000000")
	promotedHigh.Role, promotedHigh.Epoch = dbfleetv1alpha1.InstanceRunningPrimary, promoted.Status.Primary.Epoch
	f.reportInstances(m, standbyAt(low, "0/9000000"), promotedHigh)
	reportReady(f, "orders")
	done := f.waitDatabase("orders", "failover complete", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverComplete)
	})
	if done.Status.Primary.Pod != high || done.Status.Primary.Epoch != promoted.Status.Primary.Epoch {
		t.Errorf("primary %+v after the failover completed, want %s at epoch %d", done.Status.Primary, high, promoted.Status.Primary.Epoch)
	}

	// A StatefulSet scales down from its highest ordinal: a share of one would lose the primary
	// pod, so the share is kept as it is and the status says why.
	kept := f.waitMemberDatabases("orders", shares(done))[survivor].Spec.Replicas
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) { d.Spec.Replicas = 1 })
	refused := f.waitDatabase("orders", "the scale-down held", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionPropagated, metav1.ConditionFalse, dbfleetv1alpha1.ReasonPropagationFailed)
	})
	if c := meta.FindStatusCondition(refused.Status.Conditions, dbfleetv1alpha1.ConditionPropagated); !strings.Contains(c.Message, "without its primary pod "+high) {
		t.Errorf("Propagated %+v, want it to say the share would lose its primary pod %s", c, high)
	}
	m = f.placedMemberDatabases("orders")[survivor]
	if m.Spec.Replicas != kept || m.Spec.PrimaryOrdinal == nil || *m.Spec.PrimaryOrdinal != start+1 {
		t.Errorf("survivor's share: %d replicas, primaryOrdinal %v; want it kept at %d with its primary pod at %d", m.Spec.Replicas, m.Spec.PrimaryOrdinal, kept, start+1)
	}
}

// With dataDurability required, the survivor's two pods are the quorum (ANY 1 of them): the
// hub reads both and promotes the one that is further, the higher ordinal, where it used to
// compare only the lowest ordinal and wait for good.
func TestRequiredFailoverPromotesTheQuorumMemberAheadInsideTheShare(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	dbc, old, survivor := twoShareDatabase(f, func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: &dbfleetv1alpha1.SynchronousReplication{Number: 1}}
	})
	start := startOf(dbc, survivor)
	low, high := fmt.Sprintf("orders-%d", start), fmt.Sprintf("orders-%d", start+1)
	quorum := []string{low, high}
	mdbs := f.placedMemberDatabases("orders")
	f.reportInstances(mdbs[old], dbfleetv1alpha1.InstanceStatus{Pod: dbc.Status.Primary.Pod, Role: dbfleetv1alpha1.InstanceRunningPrimary,
		ReceivedLSN: "0/9000000", ReplayedLSN: "0/9000000", Ready: true,
		Synchronous: &dbfleetv1alpha1.InstanceSynchronous{Durability: dbfleetv1alpha1.DataDurabilityRequired, Wanted: 1, Number: 1,
			StandbyNames: `ANY 1 ("` + strings.Join(quorum, `", "`) + `")`, Standbys: quorum, Synchronous: quorum}})
	f.waitDatabase("orders", "the quorum recorded", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		s := d.Status.Synchronous
		return s != nil && slices.Equal(s.Standbys, quorum) && slices.Equal(s.Synchronous, quorum)
	})
	f.reportInstances(mdbs[survivor], standbyAt(low, "0/5000000"), standbyAt(high, "0/7000000"))

	f.loseCluster(old, 1)
	promoted := f.waitDatabase("orders", "promoted", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster == survivor ||
			hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForSynchronousStandby)
	})
	if promoted.Status.Primary.Cluster != survivor || promoted.Status.Primary.Pod != high {
		t.Fatalf("primary %+v (%s), want %s on pod %s, the quorum member furthest in the WAL", promoted.Status.Primary,
			describe(promoted), survivor, high)
	}
	c := meta.FindStatusCondition(promoted.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
	if c == nil || !containsAll(c.Message, "synchronous standbys compared", survivor+"/"+high+" received 0/7000000", survivor+"/"+low+" received 0/5000000") {
		t.Errorf("FailoverInProgress %+v, want it to name the synchronous standbys' LSNs compared", c)
	}
	m := f.waitMemberDatabases("orders", shares(promoted))[survivor]
	if m.Spec.PrimaryOrdinal == nil || *m.Spec.PrimaryOrdinal != start+1 {
		t.Errorf("survivor's share primaryOrdinal %v, want %d", m.Spec.PrimaryOrdinal, start+1)
	}
}
