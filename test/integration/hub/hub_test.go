package hub

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/test/framework"
)

func TestPolicyPrecedenceAndRematching(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)

	f.database("orders", 1, map[string]string{"tier": "critical"})
	f.waitDatabase("orders", "NoPolicy", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionScheduled, metav1.ConditionFalse, dbfleetv1alpha1.ReasonNoPolicy) &&
			d.Status.Policy == nil
	})

	f.policy("critical", 0, map[string]string{"tier": "critical"}, divided())
	f.waitDatabase("orders", "bound to critical", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Policy != nil && d.Status.Policy.Name == "critical" &&
			hasCondition(d, dbfleetv1alpha1.ConditionScheduled, metav1.ConditionTrue, dbfleetv1alpha1.ReasonScheduled)
	})

	// A higher priority policy takes over.
	f.policy("eu-only", 10, map[string]string{"region": "eu"}, divided())
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) { d.Labels["region"] = "eu" })
	f.waitDatabase("orders", "re-bound to eu-only after a label change", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Policy != nil && d.Status.Policy.Name == "eu-only"
	})

	// Removing the winning policy falls back to the next one.
	if err := f.c.Delete(f.ctx, &dbfleetv1alpha1.PropagationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "eu-only"}}); err != nil {
		t.Fatal(err)
	}
	f.waitDatabase("orders", "back to critical", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Policy != nil && d.Status.Policy.Name == "critical"
	})
}

func TestScheduleAndPropagate(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b, c := f.member("a", "r1", 100), f.member("b", "r2", 100), f.member("c", "r3", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 5, map[string]string{"app": "orders"})

	dbc := f.waitDatabase("orders", "scheduled on three clusters", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 3 && hasCondition(d, dbfleetv1alpha1.ConditionPropagated, metav1.ConditionTrue, "")
	})
	want := shares(dbc)
	if sum := want[a] + want[b] + want[c]; sum != 5 {
		t.Fatalf("shares %v sum to %d, want 5", want, sum)
	}
	mdbs := f.waitMemberDatabases("orders", want)

	// Ordinals are disjoint and the MemberDatabases carry what the agents need.
	seen := map[int32]string{}
	for _, p := range dbc.Status.Placements {
		mdb := mdbs[p.Cluster]
		if mdb.Namespace != dbfleetv1alpha1.MemberNamespace(p.Cluster) {
			t.Errorf("MemberDatabase for %s is in %s", p.Cluster, mdb.Namespace)
		}
		if mdb.Spec.Ordinals.Start != p.Ordinals.Start || p.Ordinals.Count != p.Replicas {
			t.Errorf("cluster %s: MemberDatabase ordinals start %d, placement %+v", p.Cluster, mdb.Spec.Ordinals.Start, p.Ordinals)
		}
		for o := p.Ordinals.Start; o < p.Ordinals.Start+p.Ordinals.Count; o++ {
			if other, dup := seen[o]; dup {
				t.Errorf("ordinal %d given to %s and %s", o, other, p.Cluster)
			}
			seen[o] = p.Cluster
		}
		if mdb.Spec.DatabaseRef.UID != dbc.UID || mdb.Spec.Database.Engine != dbfleetv1alpha1.EnginePostgres {
			t.Errorf("cluster %s: MemberDatabase spec %+v does not describe the database", p.Cluster, mdb.Spec)
		}
		wantRole := dbfleetv1alpha1.RoleReplica
		if p.Cluster == dbc.Status.Primary.Cluster {
			wantRole = dbfleetv1alpha1.RolePrimary
		}
		if mdb.Spec.Role != wantRole || mdb.Spec.Epoch != dbc.Status.Primary.Epoch {
			t.Errorf("cluster %s: role %s epoch %d, want %s epoch %d", p.Cluster, mdb.Spec.Role, mdb.Spec.Epoch, wantRole, dbc.Status.Primary.Epoch)
		}
	}
	if dbc.Status.Primary.Epoch != 1 {
		t.Errorf("first primary epoch = %d, want 1", dbc.Status.Primary.Epoch)
	}

	// Scale up: no cluster loses a replica.
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) { d.Spec.Replicas = 8 })
	up := f.waitDatabase("orders", "scaled to 8", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Replicas == 8 && hasCondition(d, dbfleetv1alpha1.ConditionScheduled, metav1.ConditionTrue, "")
	})
	for cluster, n := range want {
		if shares(up)[cluster] < n {
			t.Errorf("scale up took replicas from %s: %d -> %d", cluster, n, shares(up)[cluster])
		}
	}
	f.waitMemberDatabases("orders", shares(up))

	// Scale down to 1: one cluster keeps one replica, the others lose their MemberDatabase.
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) { d.Spec.Replicas = 1 })
	down := f.waitDatabase("orders", "scaled to 1", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Replicas == 1 && len(d.Status.Placements) == 1
	})
	f.waitMemberDatabases("orders", shares(down))
	if down.Status.Primary.Cluster != down.Status.Placements[0].Cluster {
		t.Errorf("primary %s is not on the only remaining cluster %s", down.Status.Primary.Cluster, down.Status.Placements[0].Cluster)
	}
}

func TestNoScheduleTaintGetsNoNewShare(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	f.updateMember(b, func(mc *dbfleetv1alpha1.MemberCluster) {
		mc.Spec.Taints = []corev1.Taint{{Key: "maintenance", Effect: corev1.TaintEffectNoSchedule}}
	})
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 4, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "scheduled", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionScheduled, metav1.ConditionTrue, "")
	})
	if got := shares(dbc); got[a] != 4 || got[b] != 0 {
		t.Errorf("shares %v, want all 4 on %s and none on tainted %s", got, a, b)
	}
	f.waitMemberDatabases("orders", map[string]int32{a: 4})
}

func TestUnschedulableExplainsWhy(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a := f.member("a", "r1", 100)
	f.setReady(a, metav1.ConditionUnknown)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 2, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "unschedulable", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionScheduled, metav1.ConditionFalse, dbfleetv1alpha1.ReasonUnschedulable)
	})
	msg := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled).Message
	if !containsAll(msg, "0/", "clusters") {
		t.Errorf("Scheduled message %q does not explain which clusters were excluded", msg)
	}
	if len(f.memberDatabases("orders")) != 0 {
		t.Error("an unschedulable DatabaseCluster got MemberDatabases")
	}
}

func TestStatusAggregation(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 4, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "scheduled on both", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 2
	})
	mdbs := f.waitMemberDatabases("orders", shares(dbc))
	primary := dbc.Status.Primary.Cluster
	other := a
	if primary == a {
		other = b
	}

	// Nothing reported yet: Progressing, not Available.
	f.waitDatabase("orders", "progressing before agents report", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingOut) &&
			hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, "")
	})

	// Both shares fully ready: Available, not Progressing, not Degraded.
	f.reportAsAgent(mdbs[primary], shares(dbc)[primary], true)
	f.reportAsAgent(mdbs[other], shares(dbc)[other], true)
	ready := f.waitDatabase("orders", "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, dbfleetv1alpha1.ReasonPrimaryReady) &&
			hasCondition(d, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionFalse, "") &&
			hasCondition(d, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, "") &&
			d.Status.ReadyReplicas == 4 && d.Status.Ready == "4/4"
	})
	for _, p := range ready.Status.Placements {
		if p.State != dbfleetv1alpha1.PlacementAvailable || p.ReadyReplicas != p.Replicas {
			t.Errorf("placement %+v, want Available with every replica ready", p)
		}
	}
	availableSince := meta.FindStatusCondition(ready.Status.Conditions, dbfleetv1alpha1.ConditionAvailable).LastTransitionTime

	// The replica cluster's agent goes silent: its share is Unknown, never stale-True, and the
	// DatabaseCluster says it is degraded, naming the cluster.
	f.setReady(other, metav1.ConditionUnknown)
	silent := f.waitDatabase("orders", "silent member is Unknown", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, dbfleetv1alpha1.ReasonSharesUnknown)
	})
	for _, p := range silent.Status.Placements {
		if p.Cluster == other && (p.State != dbfleetv1alpha1.PlacementUnknown || p.ReadyReplicas != 0) {
			t.Errorf("silent cluster's placement %+v, want Unknown with no ready replicas counted", p)
		}
	}
	if c := meta.FindStatusCondition(silent.Status.Conditions, dbfleetv1alpha1.ConditionDegraded); !containsAll(c.Message, other) {
		t.Errorf("Degraded message %q does not name %s", c.Message, other)
	}
	// The primary and a majority are still ready, so Available stays True without a transition.
	if c := meta.FindStatusCondition(silent.Status.Conditions, dbfleetv1alpha1.ConditionAvailable); silent.Status.ReadyReplicas >= databasecluster.AvailableThreshold(4) &&
		(c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&availableSince)) {
		t.Errorf("Available = %s (since %s), want True unchanged since %s", c.Status, c.LastTransitionTime, availableSince)
	}

	// The primary's agent goes silent too: Available is Unknown.
	f.setReady(primary, metav1.ConditionUnknown)
	f.waitDatabase("orders", "available unknown", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionUnknown, dbfleetv1alpha1.ReasonPrimaryClusterUnknown)
	})
}

func TestDeleteWaitsForMemberCleanup(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 2, map[string]string{"app": "orders"})
	f.waitDatabase("orders", "scheduled", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == 2 })
	mdbs := f.waitMemberDatabases("orders", map[string]int32{a: 1, b: 1})

	// Cluster b's agent is silent: its share keeps the agent's finalizer the hub set at create.
	blocked := mdbs[b]
	if !controllerutil.ContainsFinalizer(blocked, dbfleetv1alpha1.MemberDatabaseFinalizer) {
		t.Fatalf("MemberDatabase created without the agent's cleanup finalizer: %v", blocked.Finalizers)
	}
	f.silence(b, true)

	dbc := f.getDatabase("orders")
	if err := f.c.Delete(f.ctx, dbc); err != nil {
		t.Fatal(err)
	}
	f.waitDatabase("orders", "deletion blocked by b", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionProgressing)
		return c != nil && c.Reason == dbfleetv1alpha1.ReasonWaitingForMemberCleanup && containsAll(c.Message, b) && !containsAll(c.Message, a)
	})
	if got := f.memberDatabases("orders"); len(got) != 1 || got[b] == nil {
		t.Fatalf("MemberDatabases while blocked: %v, want only %s's", sortedKeys(got), b)
	}

	// The agent confirms cleanup by dropping its finalizer: the DatabaseCluster goes away.
	fresh := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(blocked), fresh); err != nil {
		t.Fatal(err)
	}
	controllerutil.RemoveFinalizer(fresh, dbfleetv1alpha1.MemberDatabaseFinalizer)
	if err := f.c.Update(f.ctx, fresh); err != nil {
		t.Fatal(err)
	}
	waitGone(t, f, dbc)
	if got := f.memberDatabases("orders"); len(got) != 0 {
		t.Errorf("MemberDatabases left after delete: %v", sortedKeys(got))
	}
}

func TestForceDeleteStopsWaitingForASilentMember(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a := f.member("a", "r1", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 1, map[string]string{"app": "orders"})
	f.waitMemberDatabases("orders", map[string]int32{a: 1})
	f.silence(a, true)
	dbc := f.getDatabase("orders")
	if err := f.c.Delete(f.ctx, dbc); err != nil {
		t.Fatal(err)
	}
	f.waitDatabase("orders", "deletion blocked", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionProgressing, metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForMemberCleanup)
	})
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Annotations = map[string]string{dbfleetv1alpha1.AnnotationForceDelete: "true"}
	})
	waitGone(t, f, dbc)
}

func TestHubRestartMidPropagationConverges(t *testing.T) {
	f := newFixture(t)
	stop := startHub(t)
	clusters := map[string]bool{}
	for _, n := range []string{"a", "b", "c", "d"} {
		clusters[f.member(n, "r-"+n, 100)] = true
	}
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	for _, name := range []string{"db1", "db2", "db3", "db4", "db5", "db6"} {
		f.database(name, 7, map[string]string{"app": "orders"})
	}
	// Stop the hub as soon as the first MemberDatabase exists: most of the work is in flight.
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "a first MemberDatabase", func(ctx context.Context) (bool, error) {
		return len(f.memberDatabases("db1")) > 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	startHub(t)
	for _, name := range []string{"db1", "db2", "db3", "db4", "db5", "db6"} {
		dbc := f.waitDatabase(name, "propagated after restart", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
			return d.Status.Replicas == 7 && hasCondition(d, dbfleetv1alpha1.ConditionPropagated, metav1.ConditionTrue, "")
		})
		// waitMemberDatabases fails on duplicates and on any MemberDatabase that is not placed.
		f.waitMemberDatabases(name, shares(dbc))
	}
}

func TestNoStatusWritesInSteadyState(t *testing.T) {
	f := newFixture(t)
	a := f.member("a", "r1", 100)
	// The hub watches this test's namespaces only: the status-write counter is the process's,
	// and the databases earlier tests left behind (some waiting out a failover, whose message
	// counts down) were reconciled and written by this hub too, three writes in one CI run.
	startHubAs(t, env.Config, ctrl.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{
		f.ns: {}, dbfleetv1alpha1.MemberNamespace(a): {},
	}}})
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 2, map[string]string{"app": "orders"})
	mdbs := f.waitMemberDatabases("orders", map[string]int32{a: 2})
	f.reportAsAgent(mdbs[a], 2, true)
	settled := f.waitDatabase("orders", "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})

	// Force reconciles that have nothing to change: label the DatabaseCluster (a watched change)
	// and wait until the controller has handled it, seen through the reconcile counter. The first
	// round only settles the controller's cache, which may trail the API server by our last write.
	touch := func(n int) {
		t.Helper()
		reconciles := reconcileCount(t)
		for i := range n {
			f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
				maps.Copy(d.Labels, map[string]string{"touch": fmt.Sprintf("%d-%d", n, i)})
			})
		}
		err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "reconciles of the touches", func(context.Context) (bool, error) {
			return reconcileCount(t) >= reconciles+float64(n), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	touch(1)
	writes := statusWrites(t)
	touch(3)
	if got := statusWrites(t); got != writes {
		t.Errorf("%v status writes in steady state, want 0", got-writes)
	}
	now := f.getDatabase("orders")
	if now.Status.ObservedGeneration != settled.Status.ObservedGeneration || !equalConditions(now, settled) {
		t.Errorf("status changed in steady state:\nbefore %s\nafter  %s", describe(settled), describe(now))
	}
}

func waitGone(t *testing.T, f *fixture, dbc *dbfleetv1alpha1.DatabaseCluster) {
	t.Helper()
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "DatabaseCluster deleted", func(ctx context.Context) (bool, error) {
		err := f.c.Get(ctx, client.ObjectKeyFromObject(dbc), &dbfleetv1alpha1.DatabaseCluster{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("%v\nlast status: %s", err, describe(f.getDatabase(dbc.Name)))
	}
}

func equalConditions(a, b *dbfleetv1alpha1.DatabaseCluster) bool {
	if len(a.Status.Conditions) != len(b.Status.Conditions) {
		return false
	}
	for _, c := range a.Status.Conditions {
		o := meta.FindStatusCondition(b.Status.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || !o.LastTransitionTime.Equal(&c.LastTransitionTime) {
			return false
		}
	}
	return true
}

func TestPolicyChangeMovesOnlyWhatItMust(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	a, b, c := f.member("a", "r1", 100), f.member("b", "r2", 100), f.member("c", "r3", 100)
	pp := f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	pp.Spec.Placement.ClusterAffinity.ClusterNames = []string{a, b}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	f.database("orders", 4, map[string]string{"app": "orders"})
	before := f.waitDatabase("orders", "on a and b", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		s := shares(d)
		return s[a] == 2 && s[b] == 2 && len(s) == 2
	})
	f.waitMemberDatabases("orders", shares(before))

	// b leaves the policy: its replicas must move, a's must stay.
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(pp), pp); err != nil {
		t.Fatal(err)
	}
	pp.Spec.Placement.ClusterAffinity.ClusterNames = []string{a, c}
	if err := f.c.Update(f.ctx, pp); err != nil {
		t.Fatal(err)
	}
	after := f.waitDatabase("orders", "b emptied", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		_, onB := shares(d)[b]
		return !onB && d.Status.Replicas == 4
	})
	if s := shares(after); s[a] < 2 {
		t.Errorf("policy change took replicas from %s, which stayed eligible: %v", a, s)
	}
	f.waitMemberDatabases("orders", shares(after))

	// The move is reported as an Event on the DatabaseCluster.
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "ReplicasMoved event", func(ctx context.Context) (bool, error) {
		events := &eventsv1.EventList{}
		if err := f.c.List(ctx, events, client.InNamespace(f.ns)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "orders" && e.Reason == "ReplicasMoved" && containsAll(e.Note, b+" 2→0") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Error(err)
	}
}
