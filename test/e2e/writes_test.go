package e2e

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/test/framework/process"
)

// TestFrozenAgentLosesNoAcknowledgedWrite is the failover a client must never notice as two
// primaries or lost commits: synchronous replication with dataDurability required (ANY 1 of the
// standbys in the other two members), failover.cluster.purgeMode Never, and the primary member's
// agent frozen (SIGSTOP) while its pods, kubelet and API server run on. A writer inserts numbered
// rows through status.endpoints.readWrite and, at the same time, straight into every instance.
// The instance manager in the frozen member's primary must stop taking writes on its own (no
// Lease renewal reaches it) before the hub promotes a standby at epoch + 1. Then: the windows in
// which instances accepted writes do not overlap, every acknowledged row is on the new primary,
// and once the agent is thawed the old primary rewinds, follows the new one as a standby and
// holds every acknowledged row.
func TestFrozenAgentLosesNoAcknowledgedWrite(t *testing.T) {
	fed.requireHealthy(t)
	const ns, frozen = "frozen-agent", "central"
	pp := fed.setUp(t, ns, dynamicWeights())
	pp.Spec.Failover = &dbfleetv1alpha1.FailoverBehavior{Cluster: &dbfleetv1alpha1.ClusterFailoverBehavior{PurgeMode: dbfleetv1alpha1.PurgeNever}}
	if err := fed.hub.Update(context.Background(), pp); err != nil {
		t.Fatal(err)
	}
	dbc := newDatabase(ns, "ledger", 3, frozen)
	dbc.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: &dbfleetv1alpha1.SynchronousReplication{
		Number: 1, DataDurability: dbfleetv1alpha1.DataDurabilityRequired}}
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	before := fed.primaryOn(t, dbc, frozen)
	ctx := context.Background()
	d, err := fed.database(ctx, dbc)
	if err != nil {
		t.Fatal(err)
	}
	oldPrimary := fmt.Sprintf("%s/%s-%d", frozen, dbc.Name, ordinalStart(d, frozen))
	login := fed.appCredentials(t, dbc)
	conn, err := login.connect(ctx, d.Status.Endpoints.ReadWrite, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, writerTable); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	// The quorum is in force before the fault: the primary reported who confirms its commits.
	await(t, time.Minute, "the primary's synchronous standbys on the status", func(ctx context.Context) (bool, error) {
		d, err := fed.database(ctx, dbc)
		return err == nil && d.Status.Synchronous != nil && len(d.Status.Synchronous.Synchronous) > 0, err
	})

	w := fed.startWriter(t, dbc, login)
	w.awaitAcks(t, oldPrimary, 100, time.Minute)

	pid, err := process.ReadPidFile(fed.dir.PidFile(layout.Agent(frozen)))
	if err != nil {
		t.Fatal(err)
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("thaw %s (pid %d): %v", layout.Agent(frozen), pid, err)
			}
		}
	}
	t.Cleanup(thaw)
	sw := newStopwatch(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	sw.lap(layout.Agent(frozen) + " frozen (SIGSTOP); its pods, kubelet and API server run on")

	var newPrimary dbfleetv1alpha1.PrimaryStatus
	await(t, 3*time.Minute, "a new primary outside "+frozen, func(ctx context.Context) (bool, error) {
		d, err := fed.database(ctx, dbc)
		if err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); c != nil {
			sw.mark("FailoverInProgress "+string(c.Status)+" "+c.Reason, true)
		}
		if p := d.Status.Primary; p != nil && p.Cluster != frozen {
			newPrimary = *p
			return true, nil
		}
		return false, nil
	})
	sw.lap(fmt.Sprintf("hub promoted %s at epoch %d", newPrimary.Cluster, newPrimary.Epoch))
	if newPrimary.Epoch != before.Epoch+1 {
		t.Errorf("new primary at epoch %d, want %d", newPrimary.Epoch, before.Epoch+1)
	}
	d, err = fed.database(ctx, dbc)
	if err != nil {
		t.Fatal(err)
	}
	promoted := fmt.Sprintf("%s/%s-%d", newPrimary.Cluster, dbc.Name, ordinalStart(d, newPrimary.Cluster))
	w.awaitAcks(t, promoted, 100, 2*time.Minute)
	sw.lap("the new primary " + promoted + " acknowledged 100 writes")

	thaw()
	sw.lap(layout.Agent(frozen) + " thawed (SIGCONT)")
	// The old primary's share is kept (purgeMode Never) as replicas at the new epoch: its
	// instance rewinds and streams from the new primary.
	await(t, 3*time.Minute, oldPrimary+" streaming from the new primary", func(ctx context.Context) (bool, error) {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		if err := fed.hub.Get(ctx, client.ObjectKey{Namespace: "member-" + frozen, Name: dbfleetv1alpha1.MemberDatabaseName(ns, dbc.Name)}, mdb); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, in := range mdb.Status.Instances {
			if frozen+"/"+in.Pod == oldPrimary {
				sw.mark(fmt.Sprintf("%s reports role %s at the new epoch", oldPrimary, in.Role), mdb.Status.Epoch == newPrimary.Epoch)
				return in.Role == dbfleetv1alpha1.InstanceRunningStandby && in.Ready && mdb.Status.Epoch == newPrimary.Epoch, nil
			}
		}
		return false, nil
	})
	sw.lap(oldPrimary + " streams as a standby")
	w.awaitAcks(t, promoted, 50, time.Minute)
	w.stop()

	w.checkWindows(t, sw.start)
	gap, from, attempts := w.gap(sw.start)
	acks := w.acked()
	t.Logf("writes: %d tried, %d acknowledged; longest time without an acknowledgement after the freeze: %.1fs (from %+.1fs)",
		attempts, len(acks), gap.Seconds(), from.Sub(sw.start).Seconds())
	for _, a := range acks {
		if a.instance != oldPrimary && a.instance != promoted {
			t.Errorf("row %d (%s) was acknowledged by %s, neither the old primary %s nor the new %s", a.n, a.via, a.instance, oldPrimary, promoted)
			break
		}
	}

	d, err = fed.database(ctx, dbc)
	if err != nil {
		t.Fatal(err)
	}
	missing, err := w.missingOn(ctx, d.Status.Endpoints.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) > 0 {
		t.Errorf("%d acknowledged rows are missing on the new primary (dataDurability required): first %v", len(missing), missing[:min(10, len(missing))])
	}
	ip := podIP(t, frozen, dbc, oldPrimary)
	await(t, 2*time.Minute, "every acknowledged row on the old primary "+oldPrimary, func(ctx context.Context) (bool, error) {
		missing, err := w.missingOn(ctx, ip+":5432")
		return err == nil && len(missing) == 0, nil
	})
	sw.lap(fmt.Sprintf("all %d acknowledged rows on the new primary and on the old one", len(acks)))
}

// ordinalStart is the first ordinal of cluster's share.
func ordinalStart(d *dbfleetv1alpha1.DatabaseCluster, cluster string) int32 {
	for _, p := range d.Status.Placements {
		if p.Cluster == cluster {
			return p.Ordinals.Start
		}
	}
	return -1
}

// podIP is the IP of instance (member/pod) of dbc now.
func podIP(t *testing.T, member string, dbc *dbfleetv1alpha1.DatabaseCluster, instance string) string {
	t.Helper()
	s, err := fed.share(context.Background(), member, dbc.Namespace, dbc.Name)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(s.pods, func(p corev1.Pod) bool { return member+"/"+p.Name == instance })
	if i < 0 || s.pods[i].Status.PodIP == "" {
		t.Fatalf("no IP for %s", instance)
	}
	return s.pods[i].Status.PodIP
}
