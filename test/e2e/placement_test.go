package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// TestPlacementAcrossMembers places three replicas evenly: each member runs a StatefulSet of one
// whose Pod becomes Ready, with a fleet-wide unique ordinal, and the preferred cluster holds the
// primary and its Lease.
func TestPlacementAcrossMembers(t *testing.T) {
	fed.requireHealthy(t)
	const ns = "placement"
	fed.setUp(t, ns, evenly())
	dbc := newDatabase(ns, "orders", 3, "west")
	sw := newStopwatch(t)
	fed.create(t, dbc)
	fed.awaitRollout(t, sw, dbc)

	d, err := fed.database(context.Background(), dbc)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Status.Placements) != len(members) {
		t.Fatalf("placements %+v, want one share in each of %v", d.Status.Placements, members)
	}
	starts := map[int32]string{}
	for _, p := range d.Status.Placements {
		if p.Replicas != 1 || p.Ordinals.Count != 1 {
			t.Errorf("%s: %d replicas, ordinals %+v; want 1", p.Cluster, p.Replicas, p.Ordinals)
		}
		if other, dup := starts[p.Ordinals.Start]; dup {
			t.Errorf("%s and %s share ordinal %d", p.Cluster, other, p.Ordinals.Start)
		}
		starts[p.Ordinals.Start] = p.Cluster
	}
	if p := d.Status.Primary; p.Cluster != "west" || p.Epoch != 1 {
		t.Errorf("primary %s at epoch %d, want west at 1", p.Cluster, p.Epoch)
	}
	t.Logf("placed: %s; primary %s/%d", d.Status.Clusters, d.Status.Primary.Cluster, d.Status.Primary.Epoch)
}

// TestScaleUpAndDown changes spec.replicas and follows the members' StatefulSets and Pods:
// 3 → 6 grows every share, 6 → 2 shrinks them and removes the share the division leaves empty.
func TestScaleUpAndDown(t *testing.T) {
	fed.requireHealthy(t)
	const ns = "scale"
	fed.setUp(t, ns, evenly())
	dbc := newDatabase(ns, "orders", 3, "east")
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)

	for _, replicas := range []int32{6, 2} {
		t.Logf("scaling to %d replicas", replicas)
		d, err := fed.database(context.Background(), dbc)
		if err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = replicas
		sw := newStopwatch(t)
		if err := fed.hub.Update(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		fed.awaitRollout(t, sw, dbc)
		if d, err = fed.database(context.Background(), dbc); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d replicas on %s; primary %s/%d", replicas, d.Status.Clusters, d.Status.Primary.Cluster, d.Status.Primary.Epoch)
	}
}

// awaitRollout waits until dbc has converged at its current generation, logging when the hub
// placed it, when every placed member had its StatefulSet, when all Pods were Ready and when the
// hub said Available.
func (f *federation) awaitRollout(t *testing.T, sw *stopwatch, dbc *dbfleetv1alpha1.DatabaseCluster) {
	t.Helper()
	await(t, 2*time.Minute, dbc.Name+" rolled out", func(ctx context.Context) (bool, error) {
		d, err := f.database(ctx, dbc)
		if err != nil {
			return false, err
		}
		if !sw.mark("hub placed it", d.Status.ObservedGeneration == d.Generation &&
			meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionScheduled)) {
			return false, nil
		}
		shares := map[string]share{}
		for _, p := range d.Status.Placements {
			if shares[p.Cluster], err = f.share(ctx, p.Cluster, d.Namespace, d.Name); err != nil {
				return false, err
			}
		}
		created, ready := progress(d, shares)
		sw.mark("StatefulSets in every placed member", created)
		sw.mark("every Pod Ready in the members", ready)
		sw.mark("hub reports Available", d.Status.ReadyReplicas == d.Spec.Replicas &&
			meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable))
		if err = f.converged(ctx, dbc); err != nil {
			return false, err
		}
		sw.mark("hub reports Available", true)
		return true, nil
	})
	sw.lap("converged: hub and members agree")
}

// progress reports whether every share d's status places has its StatefulSet at the share's
// size, and whether that many of its Pods are Ready, from a look at the members' shares.
func progress(d *dbfleetv1alpha1.DatabaseCluster, shares map[string]share) (created, ready bool) {
	created, ready = len(d.Status.Placements) > 0, len(d.Status.Placements) > 0
	for _, p := range d.Status.Placements {
		s := shares[p.Cluster]
		if s.sts == nil || s.sts.Spec.Replicas == nil || *s.sts.Spec.Replicas != p.Replicas {
			created = false
		}
		if s.ready() != p.Replicas {
			ready = false
		}
	}
	return created, created && ready
}
