package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
)

// TestFailoverUnderWrites is the failover a client must never notice as two primaries, nor, with
// dataDurability required, as lost commits. Each case places a database over the three members
// (its primary on one, a standby on each other), with failover.cluster.purgeMode Never, starts a
// writer that inserts numbered rows through status.endpoints.readWrite and, at the same time,
// straight into every instance, and then breaks the primary's member:
//
//   - PartitionedRequired: its pods cut from the other members' pods, both ways, and its agent
//     from the hub, by iptables rules (localfed partition); synchronous replication ANY 1 of the
//     standbys in the other two members, required.
//   - PartitionedAsync: the same partition, asynchronous replication.
//   - MemberKilledRequired: the whole member killed at once; required.
//   - LaggingStandbyRequired: a standby of another member lagging by many megabytes, then the
//     partition; required.
//   - SwitchoverRequired: no fault, a planned switchover (the first preferred cluster changed) under
//     required replication: the old primary hands its final LSN to the new one.
//   - AgentClockAheadRequired: its agent restarted with its clock an hour ahead; the primary
//     instance refuses the Lease it renews, the agent reports ClockSkew, and the hub moves the
//     primary off that member by a planned switchover.
//
// A fault of the control plane alone (an agent frozen or cut off the hub, an API server stopped)
// fails nothing over: TestWritesGoOnWithoutTheControlPlane. Here the primary's instance manager
// must stop taking writes on its own (it hears no standby, and no Lease renewal reaches it) before
// the hub promotes a standby, silent for contract.PromotionSilence, at epoch + 1. Then: the windows
// in which instances accepted writes do not overlap; with required every acknowledged row is on
// the new primary, asynchronously the rows lost are counted; and once the fault heals the old
// primary rewinds, follows the new one as a standby and converges to the new primary's rows. The
// write gap the client saw is logged (docs/performance.md).
func TestFailoverUnderWrites(t *testing.T) {
	// kill is the whole member killed at once (localfed kill: SIGKILL to its API server,
	// controller manager, scheduler, agent, kubelet, containerd and every container of its
	// node); heal starts its components again, API server first, and the kubelet its pods.
	kill := func(member string) (inject, heal func(t *testing.T)) {
		return func(t *testing.T) { fed.kill(t, member) }, func(t *testing.T) { fed.revive(t, member) }
	}
	// nodeLost kills the member's node alone (localfed kill-node); heal starts its containerd
	// and kubelet again, which start the pods again from their volumes.
	nodeLost := func(member string) (inject, heal func(t *testing.T)) {
		return func(t *testing.T) { fed.killNode(t, member) }, func(t *testing.T) { fed.revive(t, member) }
	}
	// lagThenPartition makes a standby of another member lag by many megabytes (its replay
	// paused, then 64 MB written), then partitions the primary's member: a failover while a
	// standby lags. The standby's replay resumes once the hub has promoted a new primary (a
	// standby whose replay is paused cannot follow a new timeline, and the new primary's commits
	// may wait for it); heal removes the partition.
	lagThenPartition := func(ns string) func(string) (inject, heal func(t *testing.T)) {
		superuserFromNetwork[ns] = true // to pause the standby's replay
		return func(member string) (inject, heal func(t *testing.T)) {
			var healFn func(t *testing.T)
			return func(t *testing.T) {
				lagging, resume := lagAStandby(t, ns, "ledger", member, 32<<20)
				healFn = fed.partitionForReal(t, member)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer resume()
					for ctx.Err() == nil {
						d, err := fed.database(ctx, &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"}})
						if err == nil && d.Status.Primary != nil && d.Status.Primary.Cluster != member {
							t.Logf("promoted %s while %s lagged; resuming its replay", primaryInstance(*d.Status.Primary), lagging)
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
				t.Cleanup(func() { cancel(); <-done })
			}, func(t *testing.T) { healFn(t) }
		}
	}
	// partitioned cuts the member off for real: its pods from every other member's pods and its
	// agent from the hub, by iptables rules (localfed partition); heal removes them.
	partitioned := func(member string) (inject, heal func(t *testing.T)) {
		var healFn func(t *testing.T)
		return func(t *testing.T) { healFn = fed.partitionForReal(t, member) }, func(t *testing.T) { healFn(t) }
	}
	// clockAhead restarts the member's agent with its clock an hour ahead of its pods': every
	// primary Lease it renews says a renewTime an hour in the instances' future, which they
	// refuse (ClockSkew); heal restarts it on the system's clock.
	clockAhead := func(member string) (inject, heal func(t *testing.T)) {
		agent := layout.Agent(member)
		return func(t *testing.T) {
				fed.stop(t, agent)
				fed.start(t, agent, "--clock-offset=1h")
				t.Cleanup(func() { // on the system's clock again, even when the test fails half-way
					if !t.Failed() {
						return
					}
					fed.stop(t, agent)
					fed.start(t, agent)
				})
			}, func(t *testing.T) {
				fed.stop(t, agent)
				fed.start(t, agent)
			}
	}
	// switchTo is a planned switchover: the first preference changes to target.
	switchTo := func(ns, target string) func(string) (inject, heal func(t *testing.T)) {
		return func(string) (inject, heal func(t *testing.T)) {
			return func(t *testing.T) {
				key := client.ObjectKey{Namespace: ns, Name: "ledger"}
				if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					d := &dbfleetv1alpha1.DatabaseCluster{}
					if err := fed.hub.Get(context.Background(), key, d); err != nil {
						return err
					}
					d.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{target}}
					return fed.hub.Update(context.Background(), d)
				}); err != nil {
					t.Fatal(err)
				}
			}, func(*testing.T) {}
		}
	}
	required := &dbfleetv1alpha1.SynchronousReplication{Number: 1, DataDurability: dbfleetv1alpha1.DataDurabilityRequired}
	cases := []struct {
		name, ns, member string
		synchronous      *dbfleetv1alpha1.SynchronousReplication
		fault            func(member string) (inject, heal func(t *testing.T))
		what             string
	}{
		{"PartitionedRequired", "partitioned-required", "central", required, partitioned, "partitioned: its pods cut from the other members' pods and its agent from the hub (iptables)"},
		{"PartitionedAsync", "partitioned-async", "east", nil, partitioned, "partitioned (iptables), asynchronous replication"},
		{"MemberKilledRequired", "killed-required", "east", required, kill, "the whole member killed (API server, agent, kubelet, containerd and every container: SIGKILL)"},
		{"LaggingStandbyRequired", "lagging-required", "west", required, lagThenPartition("lagging-required"), "a standby lagging by many megabytes (replay paused, 64 MB written), then the member partitioned (iptables)"},
		{"SwitchoverRequired", "switchover-required", "central", required, switchTo("switchover-required", "west"), "switchover to west asked (spec.primary.preferredClusters)"},
		{"AgentClockAheadRequired", "clock-ahead-required", "west", required, clockAhead, "agent restarted with its clock an hour ahead (--clock-offset=1h)"},
		{"PrimaryNodeLostRequired", "node-lost-required", "east", required, nodeLost,
			"the primary's node lost (kubelet, containerd and every container: SIGKILL); the member's API server and agent run on"},
		{"PrimaryCrashLoopRequired", "crash-loop-required", "west", required, crashLoop("crash-loop-required", "ledger"),
			"the primary's postgres killed (SIGKILL) every 2 s, its instance manager starting it again each time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inject, heal := tc.fault(tc.member)
			failoverUnderWrites(t, tc.ns, tc.member, tc.synchronous, inject, heal, tc.what)
		})
	}
}

// superuserFromNetwork are the namespaces of failoverUnderWrites' databases whose fault logs in
// as the superuser from outside the pods (withSuperuserFromNetwork).
var superuserFromNetwork = map[string]bool{}

func failoverUnderWrites(t *testing.T, ns, lost string, synchronous *dbfleetv1alpha1.SynchronousReplication,
	inject, heal func(t *testing.T), what string) {
	fed.requireHealthy(t)
	pp := fed.setUp(t, ns, dynamicWeights())
	pp.Spec.Failover = &dbfleetv1alpha1.FailoverBehavior{Cluster: &dbfleetv1alpha1.ClusterFailoverBehavior{PurgeMode: dbfleetv1alpha1.PurgeNever}}
	if err := fed.hub.Update(context.Background(), pp); err != nil {
		t.Fatal(err)
	}
	dbc := newDatabase(ns, "ledger", 3, lost)
	if superuserFromNetwork[ns] {
		withSuperuserFromNetwork(dbc)
	}
	if synchronous != nil {
		dbc.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: synchronous}
	}
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	before := fed.primaryOn(t, dbc, lost)
	ctx := context.Background()
	d, err := fed.database(ctx, dbc)
	if err != nil {
		t.Fatal(err)
	}
	oldPrimary := primaryInstance(*d.Status.Primary)
	login := fed.createWriterTable(t, dbc)
	if synchronous != nil {
		// The quorum is in force before the fault: the primary reported who confirms its commits.
		await(t, time.Minute, "the primary's synchronous standbys on the status", func(ctx context.Context) (bool, error) {
			d, err := fed.database(ctx, dbc)
			return err == nil && d.Status.Synchronous != nil && len(d.Status.Synchronous.Synchronous) > 0, err
		})
	}

	w := fed.startWriter(t, dbc, login)
	w.awaitAcks(t, oldPrimary, 100, time.Minute)

	sw := newStopwatch(t)
	inject(t)
	sw.lap(lost + ": " + what)

	var newPrimary dbfleetv1alpha1.PrimaryStatus
	await(t, 3*time.Minute, "a new primary outside "+lost, func(ctx context.Context) (bool, error) {
		d, err := fed.database(ctx, dbc)
		if err != nil {
			return false, err
		}
		if c := meta.FindStatusCondition(d.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); c != nil {
			sw.mark("FailoverInProgress "+string(c.Status)+" "+c.Reason, true)
		}
		if p := d.Status.Primary; p != nil && p.Cluster != lost {
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
	promoted := primaryInstance(newPrimary)
	// Until the new primary takes writes, every state its instances and the others pass through
	// is logged once: with required durability its commits wait for a standby to stream from it.
	want := w.ackedBy(promoted) + 100
	await(t, 2*time.Minute, fmt.Sprintf("%d writes acknowledged by %s", want, promoted), func(ctx context.Context) (bool, error) {
		traceInstances(ctx, sw, dbc)
		return w.ackedBy(promoted) >= want, nil
	})
	sw.lap("the new primary " + promoted + " acknowledged 100 writes")

	heal(t)
	sw.lap(lost + " healed")
	// The old primary's share is kept (purgeMode Never) as replicas at the new epoch: its
	// instance rewinds and streams from the new primary.
	await(t, 3*time.Minute, oldPrimary+" streaming from the new primary", func(ctx context.Context) (bool, error) {
		return rejoined(ctx, sw, dbc, lost, oldPrimary, newPrimary.Epoch)
	})
	sw.lap(oldPrimary + " streams as a standby")
	w.awaitAcks(t, promoted, 50, time.Minute)
	w.stop()

	w.checkWindows(t, sw.start)
	gap, from, attempts := w.gap(sw.start)
	acks := w.acked()
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
	lostRows, err := w.missingOn(ctx, d.Status.Endpoints.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE %s: writes %d tried, %d acknowledged; write gap %.1fs (from %+.1fs after the fault); acknowledged rows lost %d; promoted %s at epoch %d",
		t.Name(), attempts, len(acks), gap.Seconds(), from.Sub(sw.start).Seconds(), len(lostRows), promoted, newPrimary.Epoch)
	if synchronous != nil && synchronous.DataDurability == dbfleetv1alpha1.DataDurabilityRequired && len(lostRows) > 0 {
		t.Errorf("%d acknowledged rows are missing on the new primary (dataDurability required): first %v", len(lostRows), lostRows[:min(10, len(lostRows))])
	}
	// The old primary converges to the new primary's rows: it has every acknowledged row the new
	// one has (asynchronously, what it alone had is discarded by pg_rewind, as on the new primary).
	ip := podIP(t, lost, dbc, oldPrimary)
	await(t, 2*time.Minute, "the new primary's rows on the old primary "+oldPrimary, func(ctx context.Context) (bool, error) {
		missing, err := w.missingOn(ctx, ip+":5432")
		return err == nil && slices.Equal(missing, lostRows), nil
	})
	sw.lap(fmt.Sprintf("the old primary holds the new primary's %d acknowledged rows", len(acks)-len(lostRows)))
}

// freeze is the fault of the member's agent frozen (SIGSTOP) while its pods, kubelet and API
// server run on; heal thaws it (SIGCONT).
func freeze(member string) (inject, heal func(t *testing.T)) {
	var pid int
	return func(t *testing.T) {
			var err error
			if pid, err = process.ReadPidFile(fed.dir.PidFile(layout.Agent(member))); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			// Thawed even when the test fails half-way; a second SIGCONT does nothing.
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		}, func(t *testing.T) {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("thaw %s (pid %d): %v", layout.Agent(member), pid, err)
			}
		}
}

// rejoined reports whether the old primary (member/pod) of dbc, in the lost member's share, runs
// as a Ready standby in a share at epoch or a later one (a starved new primary may have fenced
// itself and been promoted again since). Every state it passes through is logged once, so a
// rejoin that stalls says where.
func rejoined(ctx context.Context, sw *stopwatch, dbc *dbfleetv1alpha1.DatabaseCluster, lost, oldPrimary string, epoch int64) (bool, error) {
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	if err := fed.hub.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(lost), Name: dbfleetv1alpha1.MemberDatabaseName(dbc.Namespace, dbc.Name)}, mdb); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	for _, in := range mdb.Status.Instances {
		if lost+"/"+in.Pod == oldPrimary {
			state := fmt.Sprintf("%s: role %s, ready %t, share at epoch %d", oldPrimary, in.Role, in.Ready, mdb.Status.Epoch)
			if in.Message != "" {
				state += ": " + in.Message
			}
			if r := in.Rejoin; r != nil {
				state += fmt.Sprintf(" (rejoined epoch %d: %s %s)", r.Epoch, r.Method, r.Message)
			}
			sw.mark(state, true)
			return in.Role == dbfleetv1alpha1.InstanceRunningStandby && in.Ready && mdb.Status.Epoch >= epoch &&
				mdb.Status.Epoch == mdb.Spec.Epoch, nil
		}
	}
	return false, nil
}

// traceInstances logs, once each, the states that the instances of dbc report through their
// shares (role, readiness, what they say, and the share's epoch), and the primary's synchronous
// standbys on the DatabaseCluster.
func traceInstances(ctx context.Context, sw *stopwatch, dbc *dbfleetv1alpha1.DatabaseCluster) {
	for _, m := range members {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		if err := fed.hub.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(m), Name: dbfleetv1alpha1.MemberDatabaseName(dbc.Namespace, dbc.Name)}, mdb); err != nil {
			continue
		}
		for _, in := range mdb.Status.Instances {
			state := fmt.Sprintf("%s/%s: role %s, ready %t, share %s at epoch %d", m, in.Pod, in.Role, in.Ready, mdb.Spec.Role, mdb.Status.Epoch)
			if in.Message != "" {
				state += ": " + in.Message
			}
			sw.mark(state, true)
		}
	}
	if d, err := fed.database(ctx, dbc); err == nil && d.Status.Synchronous != nil {
		sw.mark(fmt.Sprintf("synchronous at epoch %d: %v of %v", d.Status.Synchronous.Epoch, d.Status.Synchronous.Synchronous, d.Status.Synchronous.Standbys), true)
	}
}

// primaryInstance is the primary's member/pod: status.primary.pod, which the hub names.
func primaryInstance(p dbfleetv1alpha1.PrimaryStatus) string {
	return p.Cluster + "/" + p.Pod
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

// lagAStandby pauses the replay of the standby of db in the first member other than primary,
// writes 64 MB through the primary (as the superuser, over the network as <db>-superuser allows)
// and waits until that standby's share reports it at least lag bytes behind in replay. It returns
// the standby (member/pod) and a function that resumes its replay (a no-op once it is no longer
// in recovery).
func lagAStandby(t *testing.T, ns, db, primary string, lag int64) (string, func()) {
	t.Helper()
	ctx := context.Background()
	su := fed.login(t, ns, db, dbfleetv1alpha1.CredentialsSuperuser, "postgres")
	d, err := fed.database(ctx, &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: db}})
	if err != nil {
		t.Fatal(err)
	}
	var member string
	for _, m := range members {
		if m != primary {
			member = m
			break
		}
	}
	sh, err := fed.share(ctx, member, ns, db)
	if err != nil || len(sh.pods) == 0 || sh.pods[0].Status.PodIP == "" {
		t.Fatalf("no standby pod in %s (%v)", member, err)
	}
	pod := sh.pods[0]
	standby := net.JoinHostPort(pod.Status.PodIP, "5432")
	conn, err := su.connect(ctx, standby, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	resume := func() {
		c, err := su.connect(ctx, standby, 10*time.Second)
		if err != nil {
			t.Logf("resume replay on %s/%s: %v", member, pod.Name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "SELECT pg_wal_replay_resume()"); err != nil {
			t.Logf("resume replay on %s/%s: %v (it is no longer a standby)", member, pod.Name, err)
		}
	}
	p, err := su.connect(ctx, d.Status.Endpoints.ReadWrite, 10*time.Second)
	if err != nil {
		resume()
		t.Fatal(err)
	}
	defer p.Close(ctx)
	for _, stmt := range []string{"CREATE TABLE IF NOT EXISTS ballast (b text)", "INSERT INTO ballast SELECT repeat('x', 1000) FROM generate_series(1, 64000)"} {
		if _, err := p.Exec(ctx, stmt); err != nil {
			resume()
			t.Fatal(err)
		}
	}
	instance := member + "/" + pod.Name
	await(t, 2*time.Minute, instance+" reported lagging by "+strconv.FormatInt(lag>>20, 10)+" MiB", func(ctx context.Context) (bool, error) {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		if err := fed.hub.Get(ctx, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(member), Name: dbfleetv1alpha1.MemberDatabaseName(ns, db)}, mdb); err != nil {
			return false, err
		}
		for _, in := range mdb.Status.Instances {
			if in.Pod == pod.Name && in.LagBytes >= lag {
				t.Logf("%s lags by %d bytes (received %s, replayed %s)", instance, in.LagBytes, in.ReceivedLSN, in.ReplayedLSN)
				return true, nil
			}
		}
		return false, nil
	})
	return instance, resume
}
