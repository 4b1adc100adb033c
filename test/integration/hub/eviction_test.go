package hub

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/test/framework"
)

// placedAndReady creates a database of the given replicas, waits for its MemberDatabases and
// reports them all ready as their agents would.
func placedAndReady(f *fixture, name string, replicas int32, wantClusters int) *dbfleetv1alpha1.DatabaseCluster {
	f.t.Helper()
	f.database(name, replicas, map[string]string{"app": "orders"})
	dbc := f.waitDatabase(name, "placed", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == wantClusters })
	f.waitMemberDatabases(name, shares(dbc))
	reportReady(f, name)
	return f.waitDatabase(name, "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "") && d.Status.ReadyReplicas == replicas
	})
}

// replicaCluster is a cluster of the placement that does not hold the primary.
func replicaCluster(dbc *dbfleetv1alpha1.DatabaseCluster) string {
	for _, p := range dbc.Status.Placements {
		if p.Cluster != dbc.Status.Primary.Cluster {
			return p.Cluster
		}
	}
	return ""
}

// recoverCluster makes a lost cluster healthy again, as clusterhealth does when its agent renews.
func (f *fixture) recoverCluster(cluster string) {
	f.t.Helper()
	f.renewAsAgent(cluster, metav1.Now())
	f.setReady(cluster, metav1.ConditionTrue)
	f.updateMember(cluster, func(mc *dbfleetv1alpha1.MemberCluster) { mc.Spec.Taints = nil })
}

func evictionOf(dbc *dbfleetv1alpha1.DatabaseCluster, cluster string) *dbfleetv1alpha1.Eviction {
	for i := range dbc.Status.Evictions {
		if dbc.Status.Evictions[i].Cluster == cluster {
			return &dbc.Status.Evictions[i]
		}
	}
	return nil
}

// TestGracefulEvictionThenRecovery follows a lost replica cluster through the whole cycle: Unknown
// and tainted, evicted after the toleration with its share kept (as an evicting replica) until the
// replacement is Ready, then purged; when the cluster returns nothing moves back on its own, a new
// database may use it, and the rebalance annotation re-places on request.
func TestGracefulEvictionThenRecovery(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b, c := f.member("a", "r1", 100), f.member("b", "r2", 100), f.member("c", "r3", 100)
	pp := f.policy("spread", 0, map[string]string{"app": "orders"}, &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
		WeightPreference: &policyv1alpha1.ClusterPreferences{StaticWeightList: []policyv1alpha1.StaticClusterWeight{
			{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{a, b, c}}, Weight: 1}}},
	})
	pp.Spec.Placement.ClusterTolerations = []corev1.Toleration{{Key: dbfleetv1alpha1.TaintClusterUnreachable,
		Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](1)}}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	dbc := placedAndReady(f, "orders", 3, 3)
	lost := replicaCluster(dbc)

	f.loseCluster(lost, 1)
	evicted := f.waitDatabase("orders", "share evicted and kept", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		_, placed := shares(d)[lost]
		return !placed && evictionOf(d, lost) != nil
	})
	e := evictionOf(evicted, lost)
	if e.Reason != dbfleetv1alpha1.EvictionClusterFailure || e.PurgeMode != dbfleetv1alpha1.PurgeGracefully || e.Replicas != 1 || e.PurgeAfter == nil {
		t.Errorf("eviction = %+v, want ClusterFailure kept Gracefully with 1 replica", e)
	}
	if evicted.Status.Replicas != 3 {
		t.Errorf("replicas placed after the eviction = %d, want 3 (the lost one re-placed)", evicted.Status.Replicas)
	}
	old := f.memberDatabases("orders")[lost]
	if old == nil || !old.DeletionTimestamp.IsZero() || old.Labels[dbfleetv1alpha1.LabelEvicting] != "true" ||
		old.Spec.Role != dbfleetv1alpha1.RoleReplica || old.Spec.Epoch != evicted.Status.Primary.Epoch {
		t.Fatalf("the evicted share's MemberDatabase must stay, labelled evicting, as a replica at the current epoch: %+v", old)
	}
	if !hasCondition(evicted, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, "") ||
		!strings.Contains(meta.FindStatusCondition(evicted.Status.Conditions, dbfleetv1alpha1.ConditionProgressing).Message, lost) {
		t.Errorf("Progressing should name the kept share: %s", describe(evicted))
	}

	// The replacements become ready: the kept share is purged.
	f.waitMemberDatabases("orders", shares(evicted))
	reportReady(f, "orders")
	f.waitDatabase("orders", "eviction purged", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Evictions) == 0 })
	waitNoMemberDatabase(f, "orders", lost)

	// The cluster returns: nothing moves back, but it is eligible for new placements. A database
	// only it may hold is placed once the hub sees it healthy again.
	settled := f.getDatabase("orders")
	only := f.policy("only-"+lost, 0, map[string]string{"app": "payments"}, divided())
	only.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: []string{lost}}
	if err := f.c.Update(f.ctx, only); err != nil {
		t.Fatal(err)
	}
	f.database("payments", 1, map[string]string{"app": "payments"})
	f.recoverCluster(lost)
	f.waitDatabase("payments", "placed on the returned cluster", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return shares(d)[lost] == 1 })
	if got := shares(f.getDatabase("orders")); !maps.Equal(got, shares(settled)) {
		t.Errorf("replicas moved on their own when %s returned: %v -> %v", lost, shares(settled), got)
	}

	// A rebalance asks for the policy's layout again: one replica on each cluster.
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Annotations = map[string]string{dbfleetv1alpha1.AnnotationRebalance: "2026-11-29T12:00:00Z"}
	})
	f.waitDatabase("orders", "rebalanced onto the returned cluster", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return shares(d)[lost] == 1 && d.Status.ObservedRebalance == "2026-11-29T12:00:00Z"
	})
}

// TestNoEvictionWithNowhereToGo: when no cluster can take the replicas, the lost cluster's share
// is kept and the DatabaseCluster says so.
func TestNoEvictionWithNowhereToGo(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a := f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	pp := f.policy("only-a", 0, map[string]string{"app": "orders"}, divided())
	pp.Spec.Placement.ClusterAffinity = &policyv1alpha1.ClusterAffinity{ClusterNames: []string{a}}
	pp.Spec.Placement.ClusterTolerations = []corev1.Toleration{{Key: dbfleetv1alpha1.TaintClusterUnreachable,
		Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](1)}}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	placedAndReady(f, "orders", 2, 1)
	f.loseCluster(a, 1)
	held := f.waitDatabase("orders", "unschedulable, placement kept", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionScheduled)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == dbfleetv1alpha1.ReasonUnschedulable &&
			strings.Contains(c.Message, "current placement (if any) is kept")
	})
	if got := shares(held); len(got) != 1 || got[a] != 2 || len(held.Status.Evictions) != 0 {
		t.Errorf("placement %v evictions %+v, want a's 2 replicas kept in place", got, held.Status.Evictions)
	}
	if m := f.memberDatabases("orders")[a]; m == nil || !m.DeletionTimestamp.IsZero() {
		t.Errorf("a's MemberDatabase must stay: %+v", m)
	}
}

// TestApplicationFailoverMovesAFailedShare: a share that stays not Available past the policy's
// tolerationSeconds moves to another cluster, the old one kept until the replacement is Ready.
func TestApplicationFailoverMovesAFailedShare(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	f.member("c", "r3", 100)
	pp := f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	pp.Spec.Failover = &dbfleetv1alpha1.FailoverBehavior{Application: &dbfleetv1alpha1.ApplicationFailoverBehavior{
		DecisionConditions: dbfleetv1alpha1.DecisionConditions{TolerationSeconds: ptr.To[int32](2)},
		PurgeMode:          dbfleetv1alpha1.PurgeGracefully,
	}}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	dbc := placedAndReady(f, "orders", 2, 2)
	failing := replicaCluster(dbc)
	failed := time.Now()
	f.reportAsAgent(f.memberDatabases("orders")[failing], 0, false)
	moved := f.waitDatabase("orders", "failed share moved", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		_, placed := shares(d)[failing]
		return !placed && len(d.Status.Placements) == 2
	})
	took := time.Since(failed)
	t.Logf("share moved off %s %s after it became unavailable (toleration 2s)", failing, took.Round(100*time.Millisecond))
	if took < 2*time.Second {
		t.Errorf("moved after %s, before the 2s toleration", took)
	}
	if e := evictionOf(moved, failing); e == nil || e.Reason != dbfleetv1alpha1.EvictionApplicationFailure {
		t.Fatalf("evictions = %+v, want %s for ApplicationFailure", moved.Status.Evictions, failing)
	}
	if moved.Status.Primary.Cluster != dbc.Status.Primary.Cluster {
		t.Errorf("the primary moved although its share was healthy: %+v", moved.Status.Primary)
	}
	if m := f.memberDatabases("orders")[failing]; m == nil || m.Labels[dbfleetv1alpha1.LabelEvicting] != "true" {
		t.Errorf("the failed share must be kept while its replacement starts: %+v", m)
	}
	f.waitMemberDatabases("orders", shares(moved))
	reportReady(f, "orders")
	waitNoMemberDatabase(f, "orders", failing)
}

// TestEvictionRateLimitDelaysAndThenEvicts: with a burst of one and a token every 10 s, the
// second database's eviction waits (dbfleet_hub_evictions_delayed_total), then happens when the
// limit allows. dbfleet_hub_evictions_total counts each eviction once, when it is adopted: not
// the passes held back by the limit.
func TestEvictionRateLimitDelaysAndThenEvicts(t *testing.T) {
	f := newFixture(t)
	cfg := hubConfig()
	cfg.EvictionRate, cfg.EvictionBurst = 0.1, 1
	startManager(t, env.Config, ctrl.Options{}, func(ctx context.Context, mgr ctrl.Manager) error {
		return databasecluster.Setup(ctx, mgr, cfg)
	})
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	failoverPolicy(f, 1)
	first := placedAndReady(f, "orders", 2, 2)
	second := placedAndReady(f, "payments", 2, 2)
	// Both databases have a replica, not their primary, there (the primary goes to the first
	// name on a tie): their evictions wait for nothing but the limit.
	lost := replicaCluster(first)
	if replicaCluster(second) != lost {
		t.Fatalf("the primaries are on different clusters: %+v, %+v", first.Status.Primary, second.Status.Primary)
	}
	evicted := func() float64 {
		return framework.MetricSum(t, "dbfleet_hub_evictions_total", map[string]string{"reason": string(dbfleetv1alpha1.EvictionClusterFailure)})
	}
	delayedBefore, evictedBefore := framework.MetricSum(t, "dbfleet_hub_evictions_delayed_total", nil), evicted()
	offLost := func() int {
		n := 0
		for _, name := range []string{"orders", "payments"} {
			if _, placed := shares(f.getDatabase(name))[lost]; !placed {
				n++
			}
		}
		return n
	}
	f.loseCluster(lost, 1)
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "one eviction done, one delayed", func(context.Context) (bool, error) {
		return offLost() == 1 && framework.MetricSum(t, "dbfleet_hub_evictions_delayed_total", nil) >= delayedBefore+1, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := evicted() - evictedBefore; got != 1 {
		t.Errorf("dbfleet_hub_evictions_total grew by %v while one eviction was done and one held back, want 1", got)
	}
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "the delayed eviction done", func(context.Context) (bool, error) {
		return offLost() == 2, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := evicted() - evictedBefore; got != 2 {
		t.Errorf("dbfleet_hub_evictions_total grew by %v for two evictions, want 2", got)
	}
}

// purgePolicy gives the failoverPolicy's cluster failovers the given purge mode and grace period.
func purgePolicy(f *fixture, mode dbfleetv1alpha1.PurgeMode, grace *int32) {
	f.t.Helper()
	failoverPolicy(f, 1)
	pp := &dbfleetv1alpha1.PropagationPolicy{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "spread"}, pp); err != nil {
		f.t.Fatal(err)
	}
	pp.Spec.Failover = &dbfleetv1alpha1.FailoverBehavior{Cluster: &dbfleetv1alpha1.ClusterFailoverBehavior{PurgeMode: mode, GracePeriodSeconds: grace}}
	if err := f.c.Update(f.ctx, pp); err != nil {
		f.t.Fatal(err)
	}
}

// TestPurgeModeNeverKeepsTheShareUntilItIsDeleted: with purgeMode Never the evicted share stays
// after its replacement is Ready, until a person deletes its MemberDatabase.
func TestPurgeModeNeverKeepsTheShareUntilItIsDeleted(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	f.member("c", "r3", 100)
	purgePolicy(f, dbfleetv1alpha1.PurgeNever, nil)
	dbc := placedAndReady(f, "orders", 3, 3)
	lost := replicaCluster(dbc)
	f.loseCluster(lost, 1)
	evicted := f.waitDatabase("orders", "share evicted and kept", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		_, placed := shares(d)[lost]
		return !placed && evictionOf(d, lost) != nil
	})
	if e := evictionOf(evicted, lost); e.PurgeMode != dbfleetv1alpha1.PurgeNever || e.PurgeAfter != nil {
		t.Errorf("eviction %+v, want Never without purgeAfter", e)
	}
	f.waitMemberDatabases("orders", shares(evicted))
	reportReady(f, "orders")
	// The reconcile that sees every replacement ready is the one that would purge a Gracefully
	// kept share.
	ready := f.waitDatabase("orders", "replacements ready", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.ReadyReplicas == 3 && hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
	if evictionOf(ready, lost) == nil || !hasCondition(ready, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonEvictingShares) {
		t.Fatalf("the Never share was dropped once the replacements were ready: %s", describe(ready))
	}
	kept := f.memberDatabases("orders")[lost]
	if kept == nil || !kept.DeletionTimestamp.IsZero() {
		t.Fatalf("the Never share's MemberDatabase must stay: %+v", kept)
	}

	// A person deletes it: the eviction is over.
	if err := f.c.Delete(f.ctx, kept); err != nil {
		t.Fatal(err)
	}
	f.waitDatabase("orders", "eviction gone with its MemberDatabase", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Evictions) == 0 })
	waitNoMemberDatabase(f, "orders", lost)
	f.waitEvent("orders", "EvictedSharePurged", lost, "its MemberDatabase was removed")
}

// TestPurgeModeImmediatelyRemovesTheShareAtOnce: with purgeMode Immediately the evicted share's
// MemberDatabase goes with the eviction, before any replacement is ready, and nothing is kept.
func TestPurgeModeImmediatelyRemovesTheShareAtOnce(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	f.member("c", "r3", 100)
	purgePolicy(f, dbfleetv1alpha1.PurgeImmediately, nil)
	dbc := placedAndReady(f, "orders", 3, 3)
	lost := replicaCluster(dbc)
	f.loseCluster(lost, 1)
	evicted := f.waitDatabase("orders", "share evicted", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		_, placed := shares(d)[lost]
		return !placed
	})
	if len(evicted.Status.Evictions) != 0 {
		t.Errorf("evictions %+v, want none kept", evicted.Status.Evictions)
	}
	// No replacement reports ready: only the purge mode removes the share.
	waitNoMemberDatabase(f, "orders", lost)
	if d := f.getDatabase("orders"); d.Status.ReadyReplicas == 3 {
		t.Errorf("the replacement is ready (%s): the test did not separate Immediately from Gracefully", d.Status.Ready)
	}
}

// TestGracePeriodEndPurgesTheShare: a Gracefully kept share whose replacement never becomes
// ready is purged when its gracePeriodSeconds end.
func TestGracePeriodEndPurgesTheShare(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	f.member("c", "r3", 100)
	purgePolicy(f, dbfleetv1alpha1.PurgeGracefully, ptr.To[int32](2))
	dbc := placedAndReady(f, "orders", 3, 3)
	lost := replicaCluster(dbc)
	f.loseCluster(lost, 1)
	evicted := f.waitDatabase("orders", "share evicted and kept", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		_, placed := shares(d)[lost]
		return !placed && evictionOf(d, lost) != nil
	})
	e := evictionOf(evicted, lost)
	if e.PurgeMode != dbfleetv1alpha1.PurgeGracefully || e.PurgeAfter == nil || e.PurgeAfter.Sub(e.Since.Time) != 2*time.Second {
		t.Fatalf("eviction %+v, want Gracefully with purgeAfter 2 s after since", e)
	}
	// Nothing reports the replacement ready; the grace period alone ends the eviction.
	f.waitDatabase("orders", "eviction purged", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Evictions) == 0 })
	waitNoMemberDatabase(f, "orders", lost)
	f.waitEvent("orders", "EvictedSharePurged", lost, "its grace period ended")
	if d := f.getDatabase("orders"); d.Status.ReadyReplicas == 3 {
		t.Errorf("the replacement is ready (%s): the test did not separate the grace period from readiness", d.Status.Ready)
	}
}

// waitNoMemberDatabase waits until the database has no MemberDatabase for the cluster.
func waitNoMemberDatabase(f *fixture, name, cluster string) {
	f.t.Helper()
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "no MemberDatabase on "+cluster, func(ctx context.Context) (bool, error) {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		err := f.c.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(cluster),
			Name: dbfleetv1alpha1.MemberDatabaseName(f.ns, name)}, mdb)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}
