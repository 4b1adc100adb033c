package hub

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// With dataDurability required (ANY 1 of the two standbys in the other clusters), every
// acknowledged commit is on one of them, so a failover must read both to know which has them
// all (R + W > N: 2 + 1 > 2). While one of them cannot be read the hub does not promote, even
// though the other can be and is ready, and says why; once both can, it promotes the one
// furthest in the WAL. The quorum is kept on the DatabaseCluster's status, so it outlives the
// primary's cluster.
func TestRequiredFailoverWaitsForTheQuorumThenPromotesItsMostAdvanced(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	members := []string{f.member("a", "r1", 100), f.member("b", "r2", 100), f.member("c", "r3", 100)}
	slices.Sort(members)
	failoverPolicy(f, 1)
	f.database("orders", 3, map[string]string{"app": "orders"})
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: &dbfleetv1alpha1.SynchronousReplication{Number: 1}}
	})
	dbc := f.waitDatabase("orders", "placed on all three", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 3
	})
	f.waitMemberDatabases("orders", shares(dbc))
	reportReady(f, "orders")
	dbc = f.waitDatabase("orders", "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
	old := dbc.Status.Primary.Cluster
	pods := map[string]string{}
	for _, p := range dbc.Status.Placements {
		pods[p.Cluster] = fmt.Sprintf("orders-%d", p.Ordinals.Start)
	}
	var survivors []string
	for _, c := range members {
		if c != old {
			survivors = append(survivors, c)
		}
	}
	// The later name is ahead: the hub must not fall back on name order.
	behind, ahead := survivors[0], survivors[1]
	quorum := []string{pods[behind], pods[ahead]}
	slices.Sort(quorum)

	mdbs := f.placedMemberDatabases("orders")
	if got := mdbs[old].Spec.Database.Postgres; got == nil || got.Synchronous == nil || got.Synchronous.Number != 1 ||
		got.Synchronous.DataDurability != dbfleetv1alpha1.DataDurabilityRequired {
		t.Fatalf("the primary's share carries postgres %+v, want synchronous number 1, required (the default)", got)
	}
	f.reportInstances(mdbs[old], dbfleetv1alpha1.InstanceStatus{Pod: pods[old], Role: dbfleetv1alpha1.InstanceRunningPrimary,
		ReceivedLSN: "0/9000000", ReplayedLSN: "0/9000000", Ready: true,
		Synchronous: &dbfleetv1alpha1.InstanceSynchronous{Durability: dbfleetv1alpha1.DataDurabilityRequired, Wanted: 1, Number: 1,
			StandbyNames: `ANY 1 ("` + strings.Join(quorum, `", "`) + `")`, Standbys: quorum, Synchronous: quorum}})
	recorded := f.waitDatabase("orders", "the quorum recorded", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		s := d.Status.Synchronous
		return s != nil && slices.Equal(s.Synchronous, quorum)
	}).Status.Synchronous
	if recorded.Epoch != dbc.Status.Primary.Epoch || recorded.Number != 1 || !slices.Equal(recorded.Standbys, quorum) {
		t.Fatalf("status.synchronous = %+v, want epoch %d, number 1, standbys %v", recorded, dbc.Status.Primary.Epoch, quorum)
	}
	// Only the one behind can be read: it may lack commits that only the other confirmed.
	f.reportInstances(mdbs[behind], dbfleetv1alpha1.InstanceStatus{Pod: pods[behind], Role: dbfleetv1alpha1.InstanceRunningStandby,
		ReceivedLSN: "0/5000000", ReplayedLSN: "0/5000000", Ready: true})

	f.loseCluster(old, 1)
	held := f.waitDatabase("orders", "failover held for the quorum", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForSynchronousStandby)
	})
	if held.Status.Primary.Cluster != old || held.Status.Primary.Epoch != dbc.Status.Primary.Epoch {
		t.Fatalf("primary %+v while the quorum cannot be read, want still %s at epoch %d", held.Status.Primary, old, dbc.Status.Primary.Epoch)
	}
	if s := held.Status.Synchronous; s == nil || !slices.Equal(s.Standbys, quorum) {
		t.Fatalf("status.synchronous = %+v after the primary's cluster was lost, want the quorum %v kept", s, quorum)
	}
	f.waitEvent("orders", dbfleetv1alpha1.ReasonWaitingForSynchronousStandby, "required", pods[ahead])

	f.reportInstances(mdbs[ahead], dbfleetv1alpha1.InstanceStatus{Pod: pods[ahead], Role: dbfleetv1alpha1.InstanceRunningStandby,
		ReceivedLSN: "0/7000000", ReplayedLSN: "0/7000000", Ready: true})
	promoted := f.waitDatabase("orders", "promoted", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster != old
	})
	if promoted.Status.Primary.Cluster != ahead {
		t.Errorf("promoted %s, want %s, the synchronous standby furthest in the WAL", promoted.Status.Primary.Cluster, ahead)
	}
	if s := promoted.Status.Synchronous; s == nil || s.Epoch != promoted.Status.Primary.Epoch {
		t.Errorf("status.synchronous = %+v, want a new quorum at epoch %d", s, promoted.Status.Primary.Epoch)
	}
}
