package hub

import (
	"context"
	"slices"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/test/framework"
)

// loseCluster makes a cluster look as the clusterhealth controller leaves a silent one: Ready
// Unknown, unreachable taints added now, its agent last seen now with the given fenceAfter. The
// agent's last renewal is written to its Lease and handed to the hub's liveness observer, as the
// clusterhealth controller's Lease watch would: the failover gate counts the silence from there.
func (f *fixture) loseCluster(cluster string, fenceAfter int32) {
	f.t.Helper()
	now := metav1.Now()
	f.renewAsAgent(cluster, now)
	f.updateMemberStatus(cluster, func(mc *dbfleetv1alpha1.MemberCluster) {
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
			Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionUnknown, Reason: "AgentLeaseExpired", Message: "test"})
		mc.Status.Agent = &dbfleetv1alpha1.AgentSettings{HeartbeatIntervalSeconds: 1, FenceAfterSeconds: fenceAfter}
		mc.Status.LastHeartbeat = &now
	})
	f.updateMember(cluster, func(mc *dbfleetv1alpha1.MemberCluster) {
		mc.Spec.Taints = []corev1.Taint{
			{Key: dbfleetv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now},
			{Key: dbfleetv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now},
		}
	})
}

func failoverPolicy(f *fixture, tolerationSeconds int64) {
	pp := f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	pp.Spec.Placement.ClusterTolerations = []corev1.Toleration{{Key: dbfleetv1alpha1.TaintClusterUnreachable,
		Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(tolerationSeconds)}}
	if err := f.c.Update(f.ctx, pp); err != nil {
		f.t.Fatal(err)
	}
}

// reportReady reports every placed share ready (the agents of evicted shares are gone).
func reportReady(f *fixture, name string) {
	f.t.Helper()
	for _, mdb := range f.placedMemberDatabases(name) {
		f.reportAsAgent(mdb, mdb.Spec.Replicas, true)
	}
}

func TestPrimaryFailoverWaitsForFencingThenPromotes(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	failoverPolicy(f, 1)
	f.database("orders", 2, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "placed on both", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 2
	})
	f.waitMemberDatabases("orders", shares(dbc))
	reportReady(f, "orders")
	f.waitDatabase("orders", "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
	old := dbc.Status.Primary.Cluster
	survivor := a
	if old == a {
		survivor = b
	}

	// The primary's cluster goes silent; its agent fences after 2s, plus the hub's margin.
	lost := time.Now()
	f.loseCluster(old, 2)
	f.waitDatabase("orders", "waiting for fencing", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForFencing) &&
			primary(d).Cluster == old
	})
	promoted := f.waitDatabase("orders", "promoted", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster == survivor
	})
	took := time.Since(lost)
	t.Logf("promoted %s at epoch %d, %s after the cluster was lost", survivor, promoted.Status.Primary.Epoch, took.Round(100*time.Millisecond))
	if minWait := 2*time.Second + databasecluster.FencingMargin; took < minWait {
		t.Errorf("promoted after %s, before the old primary's fenceAfter + margin (%s)", took, minWait)
	}
	if promoted.Status.Primary.Epoch != dbc.Status.Primary.Epoch+1 {
		t.Errorf("epoch %d -> %d, want +1", dbc.Status.Primary.Epoch, promoted.Status.Primary.Epoch)
	}
	if _, onOld := shares(promoted)[old]; onOld || promoted.Status.Replicas != 2 {
		t.Errorf("placements %v, want both replicas off %s", shares(promoted), old)
	}
	if !hasCondition(promoted, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonPromoted) {
		t.Errorf("FailoverInProgress %+v, want Promoted", meta.FindStatusCondition(promoted.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress))
	}
	mdbs := f.waitMemberDatabases("orders", shares(promoted))
	if m := mdbs[survivor]; m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.Epoch != promoted.Status.Primary.Epoch {
		t.Errorf("survivor's MemberDatabase role %s epoch %d", m.Spec.Role, m.Spec.Epoch)
	}
	reportReady(f, "orders")
	f.waitDatabase("orders", "failover complete", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverComplete) &&
			hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
}

func TestManualFailoverOnlyReports(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	failoverPolicy(f, 0)
	d := f.database("orders", 2, map[string]string{"app": "orders"})
	_ = d
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{Failover: dbfleetv1alpha1.FailoverManual}
	})
	dbc := f.waitDatabase("orders", "placed", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == 2 })
	old := dbc.Status.Primary.Cluster
	f.loseCluster(old, 1)
	held := f.waitDatabase("orders", "manual failover reported", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonManualFailoverRequired)
	})
	if held.Status.Primary.Cluster != old || held.Status.Primary.Epoch != dbc.Status.Primary.Epoch {
		t.Errorf("Manual mode moved the primary: %+v", held.Status.Primary)
	}
}

func TestFencedPrimaryIsRepromotedWithAHigherEpoch(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a := f.member("a", "r1", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 1, map[string]string{"app": "orders"})
	mdbs := f.waitMemberDatabases("orders", map[string]int32{a: 1})
	// The agent fenced at epoch 1 while cut off, and is back: it reports Fenced at epoch 1.
	fresh := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(mdbs[a]), fresh); err != nil {
		t.Fatal(err)
	}
	before := fresh.DeepCopy()
	fresh.Status.ObservedGeneration, fresh.Status.Epoch = fresh.Generation, fresh.Spec.Epoch
	meta.SetStatusCondition(&fresh.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionFenced, Status: metav1.ConditionTrue, Reason: "HubLeaseExpired"})
	if err := f.c.Status().Patch(f.ctx, fresh, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	f.waitDatabase("orders", "epoch 2 on the same cluster", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster == a && primary(d).Epoch == 2
	})
	err := f.c.Get(f.ctx, client.ObjectKeyFromObject(mdbs[a]), fresh)
	if err != nil || fresh.Spec.Epoch != 2 || fresh.Spec.Role != dbfleetv1alpha1.RolePrimary {
		t.Errorf("MemberDatabase %+v (%v), want primary at epoch 2", fresh.Spec, err)
	}
	_ = policyv1alpha1.Placement{}
}

// TestPlannedMoveDemotesBeforePromoting moves the primary off a healthy cluster (the policy stops
// selecting it): the old primary must step down, and confirm, before another is promoted.
func TestPlannedMoveDemotesBeforePromoting(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	pp := f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 2, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "placed on both", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == 2 })
	f.waitMemberDatabases("orders", shares(dbc))
	reportReady(f, "orders")
	old := dbc.Status.Primary.Cluster
	next := a
	if old == a {
		next = b
	}

	// The policy now selects only the other cluster.
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(pp), pp); err != nil {
		t.Fatal(err)
	}
	pp.Spec.Placement.ClusterAffinity.ClusterNames = []string{next}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	demoting := f.waitDatabase("orders", "demoting", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonDemoting)
	})
	if demoting.Status.Primary.Cluster != old || demoting.Status.Primary.Epoch != 1 {
		t.Fatalf("promoted before the old primary stepped down: %+v", demoting.Status.Primary)
	}
	var oldMDB *dbfleetv1alpha1.MemberDatabase
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "old primary demoted on the hub", func(context.Context) (bool, error) {
		oldMDB = f.memberDatabases("orders")[old]
		return oldMDB != nil && oldMDB.Spec.Role == dbfleetv1alpha1.RoleReplica && oldMDB.Spec.Epoch == 2, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if m := f.memberDatabases("orders")[next]; m.Spec.Role != dbfleetv1alpha1.RoleReplica {
		t.Errorf("%s promoted before %s confirmed its demotion", next, old)
	}

	// The old cluster's agent confirms: now the other cluster is promoted at epoch 2.
	f.reportAsAgent(oldMDB, oldMDB.Spec.Replicas, true)
	moved := f.waitDatabase("orders", "promoted after the demotion", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster == next
	})
	if moved.Status.Primary.Epoch != 2 {
		t.Errorf("epoch %d, want 2", moved.Status.Primary.Epoch)
	}
	mdbs := f.waitMemberDatabases("orders", map[string]int32{next: 2})
	if m := mdbs[next]; m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.Epoch != 2 {
		t.Errorf("new primary's MemberDatabase: role %s epoch %d", m.Spec.Role, m.Spec.Epoch)
	}
}

func TestSwitchoverByPreference(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 2, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "placed on both", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == 2 })
	f.waitMemberDatabases("orders", shares(dbc))
	reportReady(f, "orders")
	old := dbc.Status.Primary.Cluster
	next := a
	if old == a {
		next = b
	}
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{next}}
	})
	f.waitDatabase("orders", "demoting", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonDemoting) &&
			primary(d).Cluster == old
	})
	var oldMDB *dbfleetv1alpha1.MemberDatabase
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "old primary demoted", func(context.Context) (bool, error) {
		oldMDB = f.memberDatabases("orders")[old]
		return oldMDB.Spec.Role == dbfleetv1alpha1.RoleReplica && oldMDB.Spec.Epoch == 2, nil
	}); err != nil {
		t.Fatal(err)
	}
	f.reportAsAgent(oldMDB, oldMDB.Spec.Replicas, true)
	moved := f.waitDatabase("orders", "switched over", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster == next && primary(d).Epoch == 2 && primary(d).Preferred == next
	})
	if len(moved.Status.Placements) != 2 {
		t.Errorf("a switchover moved replicas: %v", shares(moved))
	}
}

// TestPrimaryStaysUntilEviction: an unhealthy primary cluster whose taint is still tolerated
// keeps the primary (and its share) until the toleration runs out, as grace + toleration says.
func TestPrimaryStaysUntilEviction(t *testing.T) {
	const toleration = 4
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	failoverPolicy(f, toleration)
	f.database("orders", 2, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "placed on both", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == 2 })
	old := dbc.Status.Primary.Cluster
	lost := time.Now()
	f.loseCluster(old, 1) // fences fast: only the toleration holds the primary
	held := f.waitDatabase("orders", "waiting for eviction", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForEviction)
	})
	if held.Status.Primary.Cluster != old {
		t.Fatalf("primary moved before the eviction: %+v", held.Status.Primary)
	}
	moved := f.waitDatabase("orders", "promoted after the eviction", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster != old
	})
	if took := time.Since(lost); took < toleration*time.Second {
		t.Errorf("primary moved %s after the loss, before the %ds toleration", took, toleration)
	}
	if _, onOld := shares(moved)[old]; onOld {
		t.Errorf("old cluster still placed after the primary moved: %v", shares(moved))
	}
}

// renewAsAgent writes the cluster's agent Lease with the given renew time, as its agent's
// heartbeat does, and lets the running hub observe it.
func (f *fixture) renewAsAgent(cluster string, renewTime metav1.Time) {
	f.t.Helper()
	micro := metav1.NewMicroTime(renewTime.Time)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: dbfleetv1alpha1.AgentLeaseName,
		Labels: map[string]string{dbfleetv1alpha1.LabelCluster: cluster},
	}}
	_, err := controllerutil.CreateOrUpdate(f.ctx, f.c, lease, func() error {
		lease.Spec.HolderIdentity = ptr.To(cluster)
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](1)
		lease.Spec.RenewTime = &micro
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	// What the API server stored (microseconds), as the hub's Lease watch would deliver it.
	observeRenewal(cluster, lease.Spec.RenewTime.Time)
}

// TestFailoverCanceledWhenThePrimaryClusterReturns: a failover held at the fencing gate is
// dropped when the primary's cluster comes back before the gate opens, and FailoverInProgress
// says so instead of staying True for ever.
func TestFailoverCanceledWhenThePrimaryClusterReturns(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	failoverPolicy(f, 1)
	dbc := placedAndReady(f, "orders", 2, 2)
	old := dbc.Status.Primary

	// A slow agent: the gate holds the failover for 60 s + margin, far beyond the test.
	f.loseCluster(old.Cluster, 60)
	f.waitDatabase("orders", "waiting for fencing", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForFencing)
	})
	// Ready first, then the taints, as the clusterhealth controller writes them: in between, the
	// cluster is Ready with an expired NoExecute taint, and the hub may begin a planned move
	// (Demoting) that it then drops.
	f.recoverCluster(old.Cluster)
	back := f.waitDatabase("orders", "failover canceled, the primary working on its cluster", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		mdb := f.memberDatabases("orders")[old.Cluster]
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverCanceled) &&
			primary(d).Cluster == old.Cluster && mdb != nil &&
			mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && mdb.Spec.Epoch == primary(d).Epoch
	})
	if p := back.Status.Primary; p.Epoch < old.Epoch {
		t.Errorf("primary %+v, epoch went back from %d", p, old.Epoch)
	}
	f.waitEvent("orders", dbfleetv1alpha1.ReasonFailoverCanceled, old.Cluster)
}

// TestAnAbandonedDemotionPromotesTheOldPrimaryAgain: a planned move that is dropped after the old
// primary was told to step down (at the next epoch) promotes that primary again at a higher epoch:
// writing its share back at the old epoch would leave it a replica for good, since its agent
// never acts on a lower epoch.
func TestAnAbandonedDemotionPromotesTheOldPrimaryAgain(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	pp := f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	dbc := placedAndReady(f, "orders", 2, 2)
	old := dbc.Status.Primary
	next := a
	if old.Cluster == a {
		next = b
	}
	setClusters := func(names []string) {
		t.Helper()
		if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(pp), pp); err != nil {
			t.Fatal(err)
		}
		pp.Spec.Placement.ClusterAffinity.ClusterNames = names
		if err := f.c.Update(f.ctx, pp); err != nil {
			t.Fatal(err)
		}
	}
	setClusters([]string{next})
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "old primary told to step down", func(context.Context) (bool, error) {
		mdb := f.memberDatabases("orders")[old.Cluster]
		return mdb != nil && mdb.Spec.Role == dbfleetv1alpha1.RoleReplica && mdb.Spec.Epoch == old.Epoch+1, nil
	}); err != nil {
		t.Fatal(err)
	}

	// The move is dropped before the old primary confirms.
	setClusters(nil)
	back := f.waitDatabase("orders", "promoted again on "+old.Cluster, func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverCanceled) &&
			primary(d).Cluster == old.Cluster && primary(d).Epoch > old.Epoch+1
	})
	var mdb *dbfleetv1alpha1.MemberDatabase
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "old primary's share primary at the new epoch", func(context.Context) (bool, error) {
		mdb = f.memberDatabases("orders")[old.Cluster]
		return mdb != nil && mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && mdb.Spec.Epoch == back.Status.Primary.Epoch, nil
	}); err != nil {
		t.Fatalf("%v: %+v", err, mdb)
	}
	f.waitEvent("orders", databasecluster.ReasonDemotionAbandoned, old.Cluster)
}

// TestAStuckDemotionDoesNotShortenTheFencingWait: a planned move whose old primary never confirms
// its demotion keeps FailoverInProgress True for a long time; when that cluster is then lost,
// the failover still waits the agent's fenceAfter + margin from its last renewal, not from when
// the condition turned True.
func TestAStuckDemotionDoesNotShortenTheFencingWait(t *testing.T) {
	const fenceAfter = 1
	need := fenceAfter*time.Second + databasecluster.FencingMargin
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	pp := f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	dbc := placedAndReady(f, "orders", 2, 2)
	old := dbc.Status.Primary.Cluster
	next := a
	if old == a {
		next = b
	}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(pp), pp); err != nil {
		t.Fatal(err)
	}
	pp.Spec.Placement.ClusterAffinity.ClusterNames = []string{next}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	// The old primary's agent never confirms: the demotion lasts longer than the fencing wait.
	f.waitDatabase("orders", "demoting for longer than the fencing wait", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonDemoting) &&
			time.Since(c.LastTransitionTime.Time) > need+time.Second
	})

	lost := time.Now()
	f.loseCluster(old, fenceAfter)
	moved := f.waitDatabase("orders", "promoted", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return primary(d).Cluster == next })
	if took := time.Since(lost); took < need {
		t.Errorf("promoted %s after the old primary's cluster was lost, before its fenceAfter + margin (%s)", took, need)
	}
	if moved.Status.Primary.Epoch != 2 {
		t.Errorf("epoch %d, want 2", moved.Status.Primary.Epoch)
	}
}

// TestSwitchoverToAClusterWithoutAReplicaWaitsForOne: a preferred cluster holding no replica
// cannot take the primary; the hub says why, and switches over once the cluster has a replica.
func TestSwitchoverToAClusterWithoutAReplicaWaitsForOne(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b, c := f.member("a", "r1", 100), f.member("b", "r2", 100), f.member("c", "r3", 100)
	pp := f.policy("copies", 0, map[string]string{"app": "orders"}, nil) // Duplicated: a copy per cluster
	pp.Spec.Placement.ClusterAffinity.ClusterNames = []string{a, b}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	f.database("orders", 1, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "a copy on a and b", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == 2 })
	f.waitMemberDatabases("orders", shares(dbc))
	reportReady(f, "orders")
	f.waitDatabase("orders", "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
	old := dbc.Status.Primary

	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{c}}
	})
	pending := f.waitDatabase("orders", "switchover pending", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonSwitchoverPending)
	})
	if msg := meta.FindStatusCondition(pending.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress).Message; !containsAll(msg, c, "holds no replica") {
		t.Errorf("SwitchoverPending says %q, want why %s cannot take the primary", msg, c)
	}
	if p := pending.Status.Primary; p.Cluster != old.Cluster || p.Epoch != old.Epoch || p.Preferred == c {
		t.Errorf("primary %+v, want it on %s at epoch %d with the switchover to %s not recorded as done", p, old.Cluster, old.Epoch, c)
	}
	f.waitEvent("orders", dbfleetv1alpha1.ReasonSwitchoverPending, c, "holds no replica")

	// c may now hold a copy: the switchover goes ahead, through the demotion.
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(pp), pp); err != nil {
		t.Fatal(err)
	}
	pp.Spec.Placement.ClusterAffinity.ClusterNames = []string{a, b, c}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	f.waitDatabase("orders", "demoting", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonDemoting)
	})
	var oldMDB *dbfleetv1alpha1.MemberDatabase
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "old primary demoted", func(context.Context) (bool, error) {
		oldMDB = f.memberDatabases("orders")[old.Cluster]
		return oldMDB != nil && oldMDB.Spec.Role == dbfleetv1alpha1.RoleReplica && oldMDB.Spec.Epoch == old.Epoch+1, nil
	}); err != nil {
		t.Fatal(err)
	}
	f.reportAsAgent(oldMDB, oldMDB.Spec.Replicas, true)
	f.waitDatabase("orders", "switched over to "+c, func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster == c && primary(d).Preferred == c && primary(d).Epoch == old.Epoch+1
	})
}

// The primary's cluster is lost: the survivor whose instances have come furthest in the WAL is
// promoted, even though by name (the order without progress) the other one would be.
func TestFailoverPromotesTheShareFurthestInTheWAL(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	members := []string{f.member("a", "r1", 100), f.member("b", "r2", 100), f.member("c", "r3", 100)}
	slices.Sort(members)
	failoverPolicy(f, 1)
	f.database("orders", 3, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "placed on all three", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 3
	})
	f.waitMemberDatabases("orders", shares(dbc))
	reportReady(f, "orders")
	f.waitDatabase("orders", "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
	old := dbc.Status.Primary.Cluster
	var survivors []string
	for _, c := range members {
		if c != old {
			survivors = append(survivors, c)
		}
	}
	// The later name has received more of the old primary's WAL.
	behind, ahead := survivors[0], survivors[1]
	for cluster, lsn := range map[string]string{old: "0/9000000", behind: "0/5000000", ahead: "0/7000000"} {
		mdb := f.placedMemberDatabases("orders")[cluster]
		f.reportInstances(mdb, dbfleetv1alpha1.InstanceStatus{Pod: podOn(dbc, cluster), Role: dbfleetv1alpha1.InstanceRunningStandby,
			ReceivedLSN: lsn, ReplayedLSN: lsn, Ready: true})
	}

	f.loseCluster(old, 1)
	promoted := f.waitDatabase("orders", "promoted", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return primary(d).Cluster != old
	})
	if promoted.Status.Primary.Cluster != ahead {
		t.Errorf("promoted %s, want %s, whose instance received 0/7000000 of the WAL (%s received 0/5000000)",
			promoted.Status.Primary.Cluster, ahead, behind)
	}
}
