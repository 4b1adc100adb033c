package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// maxWriteGap is the longest a client may go without an acknowledged write while only the
// control plane is broken.
const maxWriteGap = time.Second

// TestWritesGoOnWithoutTheControlPlane breaks, one after the other, each part of the control
// plane that has no say over the data (the hub's API server, every agent, the primary's agent,
// the primary's link to the hub, the primary member's API server) for longer than every timer
// that would once have stopped the primary and failed it over (fenceAfter, the primary Lease, the
// cluster grace period, the toleration, the silence a promotion waits for). A writer writes all
// along, through status.endpoints.readWrite and straight into every instance, on one clock. For
// each fault: no stretch without an acknowledged write longer than maxWriteGap, no promotion (the
// same primary at the same epoch), writes acknowledged by that primary only; and once the fault
// heals the database converges as it was. The primary goes on because it hears its standbys (its
// failsafe, docs/failover.md), and no standby is promoted because none is silent. Last, a fault
// of the data plane that must not fail over either: one standby's member cut from the primary's
// only, while the hub sees every member (the primary's Lease stays fresh; the silent standby's
// silence alone promotes nothing).
func TestWritesGoOnWithoutTheControlPlane(t *testing.T) {
	fed.requireHealthy(t)
	const ns, home = "control-plane", "east"
	fed.setUp(t, ns, dynamicWeights())
	dbc := newDatabase(ns, "ledger", 3, home)
	dbc.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: &dbfleetv1alpha1.SynchronousReplication{
		Number: 1, DataDurability: dbfleetv1alpha1.DataDurabilityRequired}}
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	before := fed.primaryOn(t, dbc, home)
	primary := primaryInstance(before)
	login := fed.createWriterTable(t, dbc)
	w := fed.startWriter(t, dbc, login)
	w.awaitAcks(t, primary, 100, time.Minute)

	// long outlasts every timer on the way to a failover; the issue asks for 2 minutes of the
	// hub's API server and of every agent. short is for the faults of one member.
	failoverTimers := fenceAfter + clusterGracePeriod + toleration + contract.PromotionSilence
	long := max(2*time.Minute, failoverTimers+30*time.Second)
	short := max(time.Minute, failoverTimers+30*time.Second)
	agents := func() []string {
		var out []string
		for _, m := range members {
			out = append(out, layout.Agent(m))
		}
		return out
	}()
	stopAll := func(components ...string) (inject, heal func(t *testing.T)) {
		return func(t *testing.T) {
				for _, c := range components {
					fed.stop(t, c)
				}
			}, func(t *testing.T) {
				for _, c := range components {
					fed.start(t, c)
				}
			}
	}
	cases := []struct {
		name  string
		hold  time.Duration
		fault func() (inject, heal func(t *testing.T))
		what  string
	}{
		{"HubAPIServerStopped", long, func() (inject, heal func(t *testing.T)) { return stopAll(layout.APIServer(layout.HubCluster)) },
			"the hub's API server stopped"},
		{"EveryAgentStopped", long, func() (inject, heal func(t *testing.T)) { return stopAll(agents...) },
			"every member's agent stopped"},
		{"PrimaryAgentFrozen", short, func() (inject, heal func(t *testing.T)) { return freeze(home) },
			"the primary's agent frozen (SIGSTOP); its pods, kubelet and API server run on"},
		{"PrimaryCutFromTheHub", short, func() (inject, heal func(t *testing.T)) {
			return func(t *testing.T) { fed.partition(t, home) }, func(*testing.T) { fed.proxies[home].Heal() }
		}, "the primary's agent cut off the hub; it, its pods and its API server run on"},
		{"PrimaryAPIServerStopped", short, func() (inject, heal func(t *testing.T)) { return stopAll(layout.APIServer(home)) },
			"the primary member's API server stopped; its agent, kubelet and pods run on"},
		{"StandbyCutFromThePrimary", short, func() (inject, heal func(t *testing.T)) {
			// One standby's member cut from the primary's member only: the hub sees every
			// member, the primary's Lease stays fresh, the other standby confirms its commits.
			var healFn func(t *testing.T)
			return func(t *testing.T) { healFn = fed.partitionFrom(t, home, membersExcept(home)[0]) }, func(t *testing.T) { healFn(t) }
		}, "one standby's member cut from the primary's member only (localfed partition --from); the hub sees every member"},
	}
	for _, tc := range cases {
		ok := t.Run(tc.name, func(t *testing.T) {
			fed.requireHealthy(t)
			sw := newStopwatch(t)
			inject, heal := tc.fault()
			inject(t)
			sw.lap(tc.what)
			holdFault(t, sw, dbc, before, tc.hold)
			heal(t)
			sw.lap("healed")
			await(t, 3*time.Minute, "the database as it was", func(ctx context.Context) (bool, error) {
				traceInstances(ctx, sw, dbc)
				err := fed.converged(ctx, dbc)
				return err == nil, err
			})
			sw.lap("converged")
			w.awaitAcks(t, primary, 50, time.Minute)

			d, err := fed.database(context.Background(), dbc)
			if err != nil {
				t.Fatal(err)
			}
			if p := d.Status.Primary; p == nil || p.Cluster != before.Cluster || p.Pod != before.Pod || p.Epoch != before.Epoch {
				t.Errorf("primary %+v after %s, want %s at epoch %d: nothing was wrong with it", p, tc.what, primary, before.Epoch)
			}
			for _, a := range w.acked() {
				if a.at.After(sw.start) && a.instance != primary {
					t.Errorf("row %d (%s) was acknowledged by %s, not the primary %s", a.n, a.via, a.instance, primary)
					break
				}
			}
			gap, from, attempts := w.gap(sw.start)
			t.Logf("FIGURE %s: %s for %s: writes %d tried in all, longest stretch without an acknowledged write %.2fs (from %+.1fs after the fault); no promotion",
				t.Name(), tc.what, tc.hold, attempts, gap.Seconds(), from.Sub(sw.start).Seconds())
			if gap > maxWriteGap {
				t.Errorf("no write acknowledged for %s from %+.1fs after the fault (%s): more than %s", gap.Round(time.Millisecond),
					from.Sub(sw.start).Seconds(), tc.what, maxWriteGap)
			}
		})
		if !ok {
			break // the next fault would start from a broken database
		}
	}
	w.stop()
	w.checkWindows(t, w.acked()[0].sent)
}

// holdFault keeps a fault in place for hold, logging once each what the hub makes of the
// database meanwhile (a failover it holds, the primary's failsafe), and fails the test at once
// should it promote another instance than was. (The hub may not answer meanwhile.)
func holdFault(t *testing.T, sw *stopwatch, dbc *dbfleetv1alpha1.DatabaseCluster, was dbfleetv1alpha1.PrimaryStatus, hold time.Duration) {
	t.Helper()
	end := time.Now().Add(hold)
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		d, err := fed.database(ctx, dbc)
		cancel()
		if err == nil {
			for _, c := range d.Status.Conditions {
				if c.Type == dbfleetv1alpha1.ConditionFailoverInProgress || c.Type == dbfleetv1alpha1.ConditionPrimaryFailsafe {
					sw.mark(fmt.Sprintf("%s %s %s", c.Type, c.Status, c.Reason), true)
				}
			}
			if p := d.Status.Primary; p != nil && (p.Cluster != was.Cluster || p.Epoch != was.Epoch) {
				t.Fatalf("the hub promoted %s at epoch %d while only the control plane was broken", primaryInstance(*p), p.Epoch)
			}
		}
		time.Sleep(time.Second) // the fault's length is the test's design, not a wait for a condition
	}
	sw.lap(fmt.Sprintf("held the fault for %s", hold))
}
