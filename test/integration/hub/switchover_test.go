package hub

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/test/framework"
)

// spreadOverTwo starts the hub with two member clusters, a and b, and a policy spreading
// "orders" over both.
func spreadOverTwo(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	return f
}

// availableOnTwo places orders on two clusters whose agents report instance managers, its
// primary running on one and a streaming standby on the other, and waits until it is Available.
// It returns the primary's cluster and the other.
func availableOnTwo(f *fixture) (old, next string) {
	f.t.Helper()
	f.database("orders", 2, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "placed on both", func(d *dbfleetv1alpha1.DatabaseCluster) bool { return len(d.Status.Placements) == 2 })
	f.waitMemberDatabases("orders", shares(dbc))
	old = dbc.Status.Primary.Cluster
	for cluster, mdb := range f.placedMemberDatabases("orders") {
		in := dbfleetv1alpha1.InstanceStatus{Pod: podOn(dbc, cluster), Role: dbfleetv1alpha1.InstanceRunningStandby, Ready: true,
			ReceivedLSN: "0/3000000", ReplayedLSN: "0/3000000", Epoch: 1}
		if cluster == old {
			in.Role, in.PromotedEpoch = dbfleetv1alpha1.InstanceRunningPrimary, 1
		} else {
			next = cluster
		}
		f.reportInstances(mdb, in)
	}
	reportReady(f, "orders")
	f.waitDatabase("orders", "available", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, "")
	})
	return old, next
}

// podOn is the first pod of the database's share on cluster (the one a promotion there picks
// when the share has one replica), "" when it has none.
func podOn(d *dbfleetv1alpha1.DatabaseCluster, cluster string) string {
	for _, p := range d.Status.Placements {
		if p.Cluster == cluster {
			return fmt.Sprintf("%s-%d", d.Name, p.Ordinals.Start)
		}
	}
	return ""
}

// switchoverUnderway places orders on two clusters whose agents report instance managers (so the
// WAL has to be handed over), asks for a switchover to the cluster without the primary, and has
// the old primary's agent confirm the demotion, its instance stopped but not yet reporting a
// final LSN. It returns the old primary's cluster, the target, and the old share.
func switchoverUnderway(f *fixture) (string, string, *dbfleetv1alpha1.MemberDatabase) {
	f.t.Helper()
	old, next := availableOnTwo(f)

	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{next}}
	})
	var oldMDB *dbfleetv1alpha1.MemberDatabase
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "old primary demoted", func(context.Context) (bool, error) {
		oldMDB = f.memberDatabases("orders")[old]
		return oldMDB.Spec.Role == dbfleetv1alpha1.RoleReplica && oldMDB.Spec.Epoch == 2, nil
	}); err != nil {
		f.t.Fatal(err)
	}
	// The agent released the Lease and reports epoch 2; its instance is stopping.
	f.reportInstances(oldMDB, dbfleetv1alpha1.InstanceStatus{Pod: podOn(f.getDatabase("orders"), old), Role: dbfleetv1alpha1.InstanceFenced})
	f.reportAsAgent(oldMDB, oldMDB.Spec.Replicas, true)
	waiting := f.waitDatabase("orders", "demoting, waiting for the final LSN", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonDemoting) &&
			strings.Contains(c.Message, "final LSN")
	})
	if p := waiting.Status.Primary; p.Cluster != old || p.Epoch != 1 {
		f.t.Fatalf("primary %+v while the old primary's final LSN is not known, want %s at epoch 1", p, old)
	}
	if m := f.memberDatabases("orders")[next]; m.Spec.Role != dbfleetv1alpha1.RoleReplica {
		f.t.Fatalf("%s promoted before %s reported its final LSN", next, old)
	}
	f.t.Logf("FailoverInProgress: %s", meta.FindStatusCondition(waiting.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress).Message)
	return old, next, oldMDB
}

// A planned switchover promotes the target only once the demoted primary's instance has reported
// its final LSN, and hands that LSN over with the promotion: the target's MemberDatabase carries
// it as spec.promoteAfterLSN in the write that makes it primary at the new epoch, and the status
// and an Event say which LSN was handed over.
func TestSwitchoverHandsTheOldPrimarysFinalLSNToTheNewPrimary(t *testing.T) {
	f := spreadOverTwo(t)
	old, next, oldMDB := switchoverUnderway(f)

	const final = "0/30199A8"
	f.reportInstances(oldMDB, dbfleetv1alpha1.InstanceStatus{Pod: podOn(f.getDatabase("orders"), old), Role: dbfleetv1alpha1.InstanceFenced,
		Demoted: &dbfleetv1alpha1.InstanceDemotion{Epoch: 1, FinalLSN: final, Timeline: 1}})
	moved := f.waitDatabase("orders", "switched over", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster == next
	})
	if p := moved.Status.Primary; p.Epoch != 2 || p.PromoteAfterLSN != final {
		t.Errorf("primary %+v, want %s at epoch 2 promoted after %s", p, next, final)
	}
	if c := meta.FindStatusCondition(moved.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); c.Reason != dbfleetv1alpha1.ReasonPromoted ||
		!containsAll(c.Message, next, final) {
		t.Errorf("FailoverInProgress %s: %q, want Promoted naming %s and %s", c.Reason, c.Message, next, final)
	}
	mdbs := f.waitMemberDatabases("orders", shares(moved))
	if m := mdbs[next]; m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.Epoch != 2 || m.Spec.PromoteAfterLSN != final {
		t.Errorf("new primary's MemberDatabase: role %s epoch %d promoteAfterLSN %q, want primary at 2 after %s",
			m.Spec.Role, m.Spec.Epoch, m.Spec.PromoteAfterLSN, final)
	}
	if m := mdbs[old]; m.Spec.PromoteAfterLSN != "" {
		t.Errorf("the old primary's share carries promoteAfterLSN %q", m.Spec.PromoteAfterLSN)
	}
	f.waitEvent("orders", "PrimaryChanged", old, next, final)
}

// A switchover whose old primary's cluster stops being Ready while the hub waits for its final
// LSN is a failover: it no longer waits for that LSN, goes through eviction and the fencing gate,
// and promotes the target without a promotion token.
func TestSwitchoverWhoseOldClusterIsLostBecomesAFailover(t *testing.T) {
	f := newFixture(t)
	startHub(t)
	f.member("a", "r1", 100)
	f.member("b", "r2", 100)
	failoverPolicy(f, 1)
	old, next, _ := switchoverUnderway(f)

	f.loseCluster(old, 1)
	moved := f.waitDatabase("orders", "failed over", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster == next
	})
	if p := moved.Status.Primary; p.Epoch != 2 || p.PromoteAfterLSN != "" {
		t.Errorf("primary %+v, want %s at epoch 2 with no LSN handed over", p, next)
	}
	mdbs := f.waitMemberDatabases("orders", shares(moved))
	if m := mdbs[next]; m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.Epoch != 2 || m.Spec.PromoteAfterLSN != "" {
		t.Errorf("new primary's MemberDatabase: role %s epoch %d promoteAfterLSN %q, want primary at 2 without one",
			m.Spec.Role, m.Spec.Epoch, m.Spec.PromoteAfterLSN)
	}
}

// A primary whose share reports ClockSkew (its agent's clock disagrees with its instances', so
// its instance refuses the primary Lease and has fenced itself) is not promoted again on the
// same cluster, where it would refuse the next Lease too: the hub moves it to the other cluster
// by a planned switchover (demote, then promote past the final LSN), and the Demoting condition
// says why.
func TestClockSkewedPrimaryMovesByPlannedSwitchover(t *testing.T) {
	f := spreadOverTwo(t)
	old, next := availableOnTwo(f)

	// The old primary's agent now runs an hour ahead: its instance fenced itself at epoch 1
	// (a clean fast shutdown, so it knows its final LSN), and the agent says both.
	const final = "0/30199A8"
	oldMDB := f.memberDatabases("orders")[old]
	fresh := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(oldMDB), fresh); err != nil {
		t.Fatal(err)
	}
	before := fresh.DeepCopy()
	setAgentStatus(fresh, fresh.Spec.Replicas, false)
	fresh.Status.Instances = []dbfleetv1alpha1.InstanceStatus{{Pod: podOn(f.getDatabase("orders"), old), Role: dbfleetv1alpha1.InstanceFenced,
		Demoted: &dbfleetv1alpha1.InstanceDemotion{Epoch: 1, FinalLSN: final, Timeline: 1}}}
	meta.SetStatusCondition(&fresh.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionFenced, Status: metav1.ConditionTrue,
		Reason: dbfleetv1alpha1.ReasonInstanceFenced, Message: "the primary instance fenced itself at epoch 1"})
	meta.SetStatusCondition(&fresh.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionClockSkew, Status: metav1.ConditionTrue,
		Reason: dbfleetv1alpha1.ReasonClocksDisagree, Message: "the clock of instance orders-" + old + " is 1h0m0s behind the agent's"})
	if err := f.c.Status().Patch(f.ctx, fresh, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}

	demoting := f.waitDatabase("orders", "demoting the skewed primary", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionTrue, dbfleetv1alpha1.ReasonDemoting)
	})
	if c := meta.FindStatusCondition(demoting.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); !containsAll(c.Message, old, "1h0m0s behind") {
		t.Errorf("Demoting says %q, want it to name %s and its clock", c.Message, old)
	}
	if p := demoting.Status.Primary; p.Cluster != old || p.Epoch != 1 {
		t.Fatalf("primary %+v while demoting, want still %s at epoch 1 (never promoted again on a skewed cluster)", p, old)
	}
	var demoted *dbfleetv1alpha1.MemberDatabase
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "the old primary's share demoted", func(context.Context) (bool, error) {
		demoted = f.memberDatabases("orders")[old]
		return demoted.Spec.Role == dbfleetv1alpha1.RoleReplica && demoted.Spec.Epoch == 2, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Its agent releases the Lease and reports epoch 2; the instance keeps its final LSN.
	f.reportAsAgent(demoted, demoted.Spec.Replicas, true)
	moved := f.waitDatabase("orders", "switched over", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster == next
	})
	if p := moved.Status.Primary; p.Epoch != 2 || p.PromoteAfterLSN != final {
		t.Errorf("primary %+v, want %s at epoch 2 promoted after %s", p, next, final)
	}
	if m := f.waitMemberDatabases("orders", shares(moved))[old]; m.Spec.Role != dbfleetv1alpha1.RoleReplica {
		t.Errorf("the skewed cluster's share is %s, want a replica", m.Spec.Role)
	}
}

// A planned switchover does not stop a running primary for a target that does not stream from
// it: that target would never receive the WAL up to the old primary's final LSN and could not
// promote. The hub says SwitchoverPending, naming the target's instance, and leaves the primary
// taking writes; once the target streams, the demotion begins.
func TestSwitchoverWaitsForItsTargetToStream(t *testing.T) {
	f := spreadOverTwo(t)
	old, next := availableOnTwo(f)
	dbc := f.getDatabase("orders")
	mdbs := f.memberDatabases("orders")
	target := dbfleetv1alpha1.InstanceStatus{Pod: podOn(dbc, next), Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 1,
		ReceivedLSN: "0/2000000", ReplayedLSN: "0/2000000", Message: "not streaming: could not connect to the primary"}
	f.reportInstances(mdbs[next], target)

	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) {
		d.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{next}}
	})
	pending := f.waitDatabase("orders", "the switchover pending on its target", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonSwitchoverPending)
	})
	if c := meta.FindStatusCondition(pending.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); !containsAll(c.Message, next, target.Pod, "streams") {
		t.Errorf("SwitchoverPending says %q, want it to name %s, its instance %s and streaming", c.Message, next, target.Pod)
	}
	if m := f.memberDatabases("orders")[old]; m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.Epoch != 1 {
		t.Fatalf("the primary's share is %s at epoch %d while its switchover target does not stream, want primary at 1", m.Spec.Role, m.Spec.Epoch)
	}

	target.Ready, target.Message, target.ReceivedLSN, target.ReplayedLSN = true, "", "0/3000000", "0/3000000"
	f.reportInstances(mdbs[next], target)
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "the primary demoted once its target streams", func(context.Context) (bool, error) {
		m := f.memberDatabases("orders")[old]
		return m.Spec.Role == dbfleetv1alpha1.RoleReplica && m.Spec.Epoch == 2, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A switchover's target that never gets the old primary's final WAL (it stopped streaming
// between the hub's check and the old primary's shutdown) is not left waiting for good: once
// SwitchoverReplayTimeout has passed with its instance still a standby short of that LSN, the
// hub moves the primary off it by a planned move, and since its instance reports that it acts on
// the new epoch without ever having been promoted, it hands the same final LSN on to the old
// primary, which holds it. No second switchover follows while the target does not stream.
func TestSwitchoverTargetThatCannotReplayHandsThePrimaryBack(t *testing.T) {
	f := spreadOverTwo(t)
	old, next, oldMDB := switchoverUnderway(f)
	dbc := f.getDatabase("orders")
	oldPod, nextPod := podOn(dbc, old), podOn(dbc, next)

	const final = "0/30199A8"
	demotedAt1 := &dbfleetv1alpha1.InstanceDemotion{Epoch: 1, FinalLSN: final, Timeline: 1}
	f.reportInstances(oldMDB, dbfleetv1alpha1.InstanceStatus{Pod: oldPod, Role: dbfleetv1alpha1.InstanceRunningStandby,
		Epoch: 2, PromotedEpoch: 1, ReceivedLSN: final, ReplayedLSN: final, Demoted: demotedAt1})
	moved := f.waitDatabase("orders", "switched over", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster == next
	})
	if p := moved.Status.Primary; p.Epoch != 2 || p.PromoteAfterLSN != final {
		t.Fatalf("primary %+v, want %s at epoch 2 promoted after %s", p, next, final)
	}
	// The target's agent applies the promotion; its instance waits, short of the final LSN.
	nextMDB := f.waitMemberDatabases("orders", shares(moved))[next]
	// (Instances first, as the agent writes both at once: its pods' readiness never arrives alone.)
	f.reportInstances(nextMDB, dbfleetv1alpha1.InstanceStatus{Pod: nextPod, Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 2,
		ReceivedLSN: "0/3000000", ReplayedLSN: "0/3000000", Message: "waiting to replay past " + final})
	f.reportAsAgent(nextMDB, nextMDB.Spec.Replicas, false)

	var demotedTarget *dbfleetv1alpha1.MemberDatabase
	var completeTooSoon string
	if err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "the stuck target's share demoted", func(context.Context) (bool, error) {
		// Its pods are Ready, but its instance is a standby: the failover is not complete.
		if c := meta.FindStatusCondition(f.getDatabase("orders").Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); c != nil &&
			c.Reason == dbfleetv1alpha1.ReasonFailoverComplete && completeTooSoon == "" {
			completeTooSoon = c.Message
		}
		demotedTarget = f.memberDatabases("orders")[next]
		return demotedTarget.Spec.Role == dbfleetv1alpha1.RoleReplica && demotedTarget.Spec.Epoch == 3, nil
	}); err != nil {
		t.Fatal(err)
	}
	if completeTooSoon != "" {
		t.Errorf("FailoverComplete (%q) while the target's instance was a standby short of %s", completeTooSoon, final)
	}
	// The hub writes the share before the status; wait for the status to say why.
	d := f.waitDatabase("orders", "Demoting naming "+nextPod+" short of "+final, func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
		return c != nil && c.Reason == dbfleetv1alpha1.ReasonDemoting && containsAll(c.Message, nextPod, final, "short of")
	})
	if since := d.Status.Primary.Since; since == nil || time.Since(since.Time) < 10*time.Second {
		t.Errorf("the target was demoted %v after it was promoted, want SwitchoverReplayTimeout (15s) at least", since)
	}
	// Its agent applies epoch 3; its instance acts on it, never promoted.
	f.reportAsAgent(demotedTarget, demotedTarget.Spec.Replicas, false)
	f.reportInstances(demotedTarget, dbfleetv1alpha1.InstanceStatus{Pod: nextPod, Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 3,
		ReceivedLSN: "0/3000000", ReplayedLSN: "0/3000000"})

	back := f.waitDatabase("orders", "the primary back on "+old, func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return d.Status.Primary.Cluster == old
	})
	if p := back.Status.Primary; p.Epoch != 3 || p.PromoteAfterLSN != final || p.Pod != oldPod {
		t.Errorf("primary %+v, want %s on %s at epoch 3 promoted after %s", p, oldPod, old, final)
	}
	mdbs := f.waitMemberDatabases("orders", shares(back))
	if m := mdbs[old]; m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.Epoch != 3 || m.Spec.PromoteAfterLSN != final {
		t.Errorf("the old primary's share: role %s epoch %d promoteAfterLSN %q, want primary at 3 after %s",
			m.Spec.Role, m.Spec.Epoch, m.Spec.PromoteAfterLSN, final)
	}
	f.waitEvent("orders", "PrimaryChanged", next, old, final, "never ran as primary")

	// The old primary runs again; the target, not streaming yet, is not switched to again.
	f.reportAsAgent(mdbs[old], mdbs[old].Spec.Replicas, true)
	f.reportInstances(mdbs[old], dbfleetv1alpha1.InstanceStatus{Pod: oldPod, Role: dbfleetv1alpha1.InstanceRunningPrimary, Ready: true,
		Epoch: 3, PromotedEpoch: 3, ReceivedLSN: "0/3019A00", ReplayedLSN: "0/3019A00", Demoted: demotedAt1})
	f.reportAsAgent(mdbs[next], mdbs[next].Spec.Replicas, true)
	f.waitDatabase("orders", "the switchover pending again", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionFailoverInProgress, metav1.ConditionFalse, dbfleetv1alpha1.ReasonSwitchoverPending)
	})
	if m := f.memberDatabases("orders")[old]; m.Spec.Role != dbfleetv1alpha1.RolePrimary || m.Spec.Epoch != 3 {
		t.Errorf("the primary's share is %s at epoch %d, want primary at 3 until the target streams", m.Spec.Role, m.Spec.Epoch)
	}
}
