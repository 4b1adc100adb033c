package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// TestDeleteLeavesNothingBehind deletes a database placed on every member: once the hub lets
// the DatabaseCluster go, no member has its StatefulSet, Service, budgets, primary Lease, Pods
// or (with whenDeleted: Delete) volume claims, and the hub has no MemberDatabase of it.
func TestDeleteLeavesNothingBehind(t *testing.T) {
	fed.requireHealthy(t)
	const ns = "delete"
	fed.setUp(t, ns, evenly())
	dbc := newDatabase(ns, "orders", 3, "central")
	dbc.Spec.Storage.RetentionPolicy.WhenDeleted = dbfleetv1alpha1.DeletePVC
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)

	sw := newStopwatch(t)
	fed.deleteAndWait(t, dbc)
	sw.lap("the hub released the DatabaseCluster (every agent confirmed)")
	// The agents removed their own objects before confirming; Pods and claims follow the
	// StatefulSets through each member's garbage collector.
	for _, m := range members {
		left, err := fed.leftovers(context.Background(), m, ns, dbc.Name)
		if err != nil {
			t.Fatal(err)
		}
		left = slices.DeleteFunc(left, func(s string) bool {
			return strings.HasPrefix(s, "Pod ") || strings.HasPrefix(s, "PersistentVolumeClaim ")
		})
		if len(left) > 0 {
			t.Errorf("%s still has %s after the hub released the DatabaseCluster", m, strings.Join(left, ", "))
		}
	}
	await(t, time.Minute, "nothing of orders left in any member", func(ctx context.Context) (bool, error) {
		var left []string
		for _, m := range members {
			l, err := fed.leftovers(ctx, m, ns, dbc.Name)
			if err != nil {
				return false, err
			}
			if len(l) > 0 {
				left = append(left, fmt.Sprintf("%s: %s", m, strings.Join(l, ", ")))
			}
		}
		if len(left) > 0 {
			return false, fmt.Errorf("left: %s", strings.Join(left, "; "))
		}
		return true, nil
	})
	sw.lap("nothing left in any member (Pods and claims included)")
}
