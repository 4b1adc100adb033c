package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// TestPolicyChangeKeepsReadyReplicas moves west's share to central by changing the policy's
// weights (east 2, west 1 → east 2, central 1) and follows, while the replicas migrate, the Ready
// Pods in the members and the hub's count of them. The documented minimum (docs/hub.md): the
// shares that stay are untouched and a share that leaves a cluster entirely is kept until its
// replacements are Ready, so the Ready count never drops below spec.replicas minus the replicas
// taken from clusters that keep a smaller share — here all 3.
func TestPolicyChangeKeepsReadyReplicas(t *testing.T) {
	fed.requireHealthy(t)
	const ns = "migrate"
	pp := fed.setUp(t, ns, staticWeights(map[string]int64{"east": 2, "west": 1}))
	dbc := newDatabase(ns, "orders", 3, "east")
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	before, err := fed.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	if p := before.Status.Placements; len(p) != 2 || p[0].Cluster != "east" || p[0].Replicas != 2 {
		t.Fatalf("placements %+v, want east 2 and west 1", p)
	}
	minimum := dbc.Spec.Replicas // west leaves whole; east keeps its 2

	// Ready counts fall only through changes the watches deliver, so checking after each change
	// checks every state the migration passes through. The hub counts the placed shares in
	// status.readyReplicas and the kept ones in status.evictions.
	lowPlaced, lowHub, lowPods := dbc.Spec.Replicas, dbc.Spec.Replicas, dbc.Spec.Replicas
	var bad violations
	watch := fed.watchDatabase(t, dbc, func(st fleetState) {
		var pods int32
		for _, s := range st.shares {
			pods += s.ready()
		}
		hub := st.dbc.Status.ReadyReplicas
		for _, e := range st.dbc.Status.Evictions {
			hub += e.ReadyReplicas
		}
		lowPlaced, lowHub, lowPods = min(lowPlaced, st.dbc.Status.ReadyReplicas), min(lowHub, hub), min(lowPods, pods)
		if hub < minimum || pods < minimum {
			detail := ""
			for m, s := range st.shares {
				for _, p := range s.pods {
					detail += fmt.Sprintf(" %s/%s ready=%t deleting=%t", m, p.Name, podReady(&p), p.DeletionTimestamp != nil)
				}
			}
			bad.add("hub %d ready (%d placed), %d Ready Pods in the members at %s:%s", hub, st.dbc.Status.ReadyReplicas, pods,
				time.Now().Format(time.StampMilli), detail)
		}
	})

	sw := newStopwatch(t)
	pp.Spec.Placement = staticWeights(map[string]int64{"east": 2, "central": 1})
	if err := fed.hub.Update(context.Background(), pp); err != nil {
		t.Fatal(err)
	}
	await(t, 2*time.Minute, "west's share moved to central", func(ctx context.Context) (bool, error) {
		d, err := fed.database(ctx, dbc)
		if err != nil {
			return false, err
		}
		sw.mark("hub moved the share to central", placedOn(d, "central") && !placedOn(d, "west"))
		err = fed.converged(ctx, dbc)
		return err == nil, err
	})
	sw.lap("converged on east and central")
	bad.report(t, watch.stop(), fmt.Sprintf("Ready count never below %d", minimum))
	t.Logf("lowest Ready count while migrating: member Pods %d, hub %d (placed shares alone %d) of %d",
		lowPods, lowHub, lowPlaced, dbc.Spec.Replicas)

	after, err := fed.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	if after.Status.Primary.Cluster != "east" || after.Status.Primary.Epoch != before.Status.Primary.Epoch {
		t.Errorf("primary moved from east/%d to %s/%d; the share it is in did not move",
			before.Status.Primary.Epoch, after.Status.Primary.Cluster, after.Status.Primary.Epoch)
	}
}

// placedOn reports whether d's status places replicas on cluster.
func placedOn(d *dbfleetv1alpha1.DatabaseCluster, cluster string) bool {
	for _, p := range d.Status.Placements {
		if p.Cluster == cluster && p.Replicas > 0 {
			return true
		}
	}
	return false
}
