package databasecluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestDisruptionPausesEvictionsWhenTooManyClustersAreDown(t *testing.T) {
	fleet := func(total, down int) (map[string]*dbfleetv1alpha1.MemberCluster, []string) {
		out := map[string]*dbfleetv1alpha1.MemberCluster{}
		var placed []string
		for i := range total {
			status := metav1.ConditionTrue
			if i < down {
				status = metav1.ConditionUnknown
			}
			name := fmt.Sprintf("c%02d", i)
			out[name] = &dbfleetv1alpha1.MemberCluster{Status: dbfleetv1alpha1.MemberClusterStatus{
				Conditions: []metav1.Condition{{Type: dbfleetv1alpha1.ConditionReady, Status: status}}}}
			placed = append(placed, name)
		}
		// Clusters the database is not placed on count for nothing, down or not.
		for i := range 10 {
			out[fmt.Sprintf("gone%02d", i)] = &dbfleetv1alpha1.MemberCluster{}
		}
		return out, placed
	}
	for _, tc := range []struct {
		total, down int
		paused      bool
	}{
		{1, 1, false},  // one cluster: its failover is a move elsewhere
		{2, 1, false},  // one lost: fail over
		{2, 2, true},   // every cluster: the hub's side
		{3, 1, false},  // the e2e suite's partitions
		{3, 2, false},  // two lost of three: below the minimum of 3
		{3, 3, true},   // every agent stopped
		{5, 2, false},  // 40%
		{5, 3, true},   // 60%, 3 clusters
		{10, 5, false}, // 50%
		{10, 6, true},  // 60%
	} {
		members, placed := fleet(tc.total, tc.down)
		why := disruption(members, placed, DefaultUnhealthyClusterThreshold)
		if (why != "") != tc.paused {
			t.Errorf("%d of %d clusters down: paused %t (%q), want %t", tc.down, tc.total, why != "", why, tc.paused)
		}
		if tc.paused && !strings.Contains(why, fmt.Sprintf("%d of the %d clusters the database is placed on are not Ready", tc.down, tc.total)) {
			t.Errorf("%d of %d down: message %q does not say how many", tc.down, tc.total, why)
		}
	}
}

// Evictions stay paused for the settle period after a disruption was last seen, so clusters
// coming back a moment apart do not take each other's shares; then they go on as usual.
func TestEvictionsStayPausedWhileTheClustersComeBack(t *testing.T) {
	var d disruptionMemory
	db := types.NamespacedName{Namespace: "shop", Name: "orders"}
	start := time.Date(2026, 12, 4, 7, 0, 0, 0, time.UTC)
	const settle = 8 * time.Second
	if why, _ := d.note(db, "", start, settle); why != "" {
		t.Fatalf("paused before any disruption: %q", why)
	}
	if why, _ := d.note(db, "3 of 3 member clusters are not Ready", start, settle); why == "" {
		t.Fatal("not paused during a disruption")
	}
	// It lasts two minutes; it ends when a reconcile first finds it over.
	if why, _ := d.note(db, "3 of 3 member clusters are not Ready", start.Add(2*time.Minute), settle); why == "" {
		t.Fatal("not paused during a disruption")
	}
	end := start.Add(2*time.Minute + time.Second)
	if why, wait := d.note(db, "", end, settle); why == "" || wait != settle {
		t.Errorf("as the disruption ends: %q, look again in %s; want paused for %s", why, wait, settle)
	}
	why, wait := d.note(db, "", end.Add(3*time.Second), settle)
	if why == "" || wait != 5*time.Second {
		t.Errorf("3 s after the disruption: %q, look again in %s; want paused, again in 5s", why, wait)
	}
	if why, _ := d.note(types.NamespacedName{Namespace: "shop", Name: "payments"}, "", end.Add(time.Second), settle); why != "" {
		t.Errorf("another database, whose clusters were never down, paused: %q", why)
	}
	if why, _ := d.note(db, "", end.Add(settle), settle); why != "" {
		t.Errorf("a whole settle period after the disruption: still paused: %q", why)
	}
}
