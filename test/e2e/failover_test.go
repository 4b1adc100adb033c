package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
)

// failoverMargin is what the failover bound allows beyond the configured timings, for a loaded
// 2-core machine: the hub's and agents' reaction times and the test's polling.
const failoverMargin = 30 * time.Second

// TestMemberLoss partitions the primary's member (west: its pods cut from the other members'
// pods and its agent from the hub, localfed partition): the hub must move the primary and west's
// share within the failover bound (grace + toleration; fenceAfter + the fencing margin; the
// standby's silence, wal_receiver_timeout + contract.PromotionSilence; whichever is longest)
// plus a margin, at epoch + 1, and the replacements become Ready. Then the partition heals and
// west's agent must remove its stale share: west ends running nothing of the database unless
// the placement names it again, and no Pod labelled primary. (An agent merely stopped fails
// nothing over: TestWritesGoOnWithoutTheControlPlane.)
func TestMemberLoss(t *testing.T) {
	fed.requireHealthy(t)
	const ns, lost = "lost-member", "west" // not member-*: the hub keeps those for its members
	fed.setUp(t, ns, dynamicWeights())
	dbc := newDatabase(ns, "orders", 3, lost)
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	before := fed.primaryOn(t, dbc, lost)

	sw := newStopwatch(t)
	heal := fed.partitionForReal(t, lost)
	cut := sw.lap(lost + " partitioned")
	t.Run("FailsOverWithinTheBound", func(t *testing.T) {
		promoted := fed.awaitFailover(t, sw, dbc, before, lost)
		silence := pgconf.WALReceiverTimeout + contract.PromotionSilence
		bound := max(clusterGracePeriod+toleration, fenceAfter+databasecluster.FencingMargin, silence) + failoverMargin
		t.Logf("primary moved %.1fs after the partition (grace %s + toleration %s; fenceAfter %s + margin %s; silence %s; bound %s)",
			(promoted - cut).Seconds(), clusterGracePeriod, toleration, fenceAfter, databasecluster.FencingMargin, silence, bound)
		if promoted-cut > bound {
			t.Errorf("failover took %s, more than %s", promoted-cut, bound)
		}
	})
	t.Run("ReturningMemberIsCleanedUp", func(t *testing.T) {
		fed.awaitReturn(t, sw, dbc, lost, heal, "partition healed")
	})
}

// TestHubRestartMidFailover partitions the primary's member (east) and, while the hub waits
// out the policy's toleration (20 s here), restarts the hub: the new hub process must carry the
// failover through (epoch + 1, replacements Ready), and clean east up when it returns.
func TestHubRestartMidFailover(t *testing.T) {
	fed.requireHealthy(t)
	const ns, lost = "hub-restart", "east"
	placement := dynamicWeights()
	placement.ClusterTolerations = tolerateUnreachable(20 * time.Second)
	fed.setUp(t, ns, placement)
	dbc := newDatabase(ns, "orders", 3, lost)
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	before := fed.primaryOn(t, dbc, lost)

	sw := newStopwatch(t)
	heal := fed.partitionForReal(t, lost)
	sw.lap(lost + " partitioned")
	await(t, time.Minute, "the failover under way", func(ctx context.Context) (bool, error) {
		d, err := fed.database(ctx, dbc)
		if err != nil {
			return false, err
		}
		return meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress), nil
	})
	d, err := fed.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
	sw.lap("failover under way: " + c.Reason + ": " + c.Message)
	fed.stop(t, layout.Hub)
	if d, err = fed.database(context.Background(), dbc); err != nil {
		t.Fatal(err)
	}
	sw.lap("hub stopped; primary " + d.Status.Primary.Cluster)
	if d.Status.Primary.Cluster != lost {
		t.Fatalf("the primary left %s before the hub stopped: not a restart mid-failover", lost)
	}
	fed.start(t, layout.Hub)
	sw.lap("hub started again")
	fed.awaitFailover(t, sw, dbc, before, lost)
	fed.awaitReturn(t, sw, dbc, lost, heal, "partition healed")
}

// primaryOn checks that dbc's primary is on cluster and returns its status.
func (f *federation) primaryOn(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster, cluster string) dbfleetv1alpha1.PrimaryStatus {
	t.Helper()
	d, err := f.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.Primary == nil || d.Status.Primary.Cluster != cluster {
		t.Fatalf("primary %+v, want it on %s (spec.primary.preferredClusters)", d.Status.Primary, cluster)
	}
	t.Logf("primary on %s at epoch %d; placed on %s", cluster, d.Status.Primary.Epoch, d.Status.Clusters)
	return *d.Status.Primary
}

// awaitFailover follows the failover away from the lost member until the database has
// converged on the others, logging each step, and checks the new primary's epoch. It returns
// when the promotion was seen, on sw.
func (f *federation) awaitFailover(t *testing.T, sw *stopwatch, dbc *dbfleetv1alpha1.DatabaseCluster,
	before dbfleetv1alpha1.PrimaryStatus, lost string) time.Duration {
	t.Helper()
	const promoted = "hub promoted a new primary"
	await(t, 2*time.Minute, "failover away from "+lost, func(ctx context.Context) (bool, error) {
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := f.hub.Get(ctx, client.ObjectKey{Name: lost}, mc); err != nil {
			return false, err
		}
		sw.mark("hub marked "+lost+" Ready=Unknown", meta.IsStatusConditionPresentAndEqual(mc.Status.Conditions,
			dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown))
		sw.mark("hub tainted "+lost+" dbfleet.io/unreachable", len(mc.Spec.Taints) > 0)
		d, err := f.database(ctx, dbc)
		if err != nil {
			return false, err
		}
		moved := sw.mark(lost+"'s share evicted", !placedOn(d, lost))
		if !sw.mark(promoted, d.Status.Primary != nil && d.Status.Primary.Cluster != lost) || !moved {
			return false, nil
		}
		sw.mark("hub reports every replica Ready and Available", d.Status.ReadyReplicas == d.Spec.Replicas &&
			meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable))
		err = f.converged(ctx, dbc, lost)
		return err == nil, err
	})
	sw.lap("converged on the other members")
	d, err := f.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Status.Primary; p.Cluster == lost || p.Epoch != before.Epoch+1 {
		t.Errorf("primary %s at epoch %d, want another cluster than %s at epoch %d", p.Cluster, p.Epoch, lost, before.Epoch+1)
	}
	t.Logf("new primary %s at epoch %d; placed on %s", d.Status.Primary.Cluster, d.Status.Primary.Epoch, d.Status.Clusters)
	at, _ := sw.at(promoted)
	return at
}

// awaitReturn ends the lost member's fault (heal, which says what it did) and waits until the
// whole fleet has converged: the member's stale share is gone (unless the placement names it), no Pod there is
// labelled primary and no primary Lease there is unexpired. Nothing moves back on its own: the
// primary stays where the failover put it.
func (f *federation) awaitReturn(t *testing.T, sw *stopwatch, dbc *dbfleetv1alpha1.DatabaseCluster, lost string, heal func(*testing.T), healed string) {
	t.Helper()
	failedOver, err := f.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := f.share(context.Background(), lost, dbc.Namespace, dbc.Name); err == nil {
		t.Logf("before it returns, %s runs a StatefulSet (%t) and %d Pods of %s, labelled primary: %v",
			lost, s.sts != nil, len(s.pods), dbc.Name, s.primaries())
	}
	heal(t)
	sw.lap(lost + ": " + healed)
	await(t, 2*time.Minute, lost+" cleaned up", func(ctx context.Context) (bool, error) {
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := f.hub.Get(ctx, client.ObjectKey{Name: lost}, mc); err != nil {
			return false, err
		}
		sw.mark("hub sees "+lost+" Ready again", meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady))
		s, err := f.share(ctx, lost, dbc.Namespace, dbc.Name)
		if err != nil {
			return false, err
		}
		sw.mark(lost+" runs no Pod labelled primary", len(s.primaries()) == 0)
		err = f.converged(ctx, dbc)
		return err == nil, err
	})
	sw.lap("converged with " + lost + " back: its stale share removed")
	d, err := f.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	if p, was := d.Status.Primary, failedOver.Status.Primary; p.Cluster != was.Cluster || p.Epoch != was.Epoch {
		t.Errorf("primary moved from %s/%d to %s/%d when %s returned", was.Cluster, was.Epoch, p.Cluster, p.Epoch, lost)
	}
}
