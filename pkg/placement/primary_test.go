package placement

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestPrimary(t *testing.T) {
	recently := t0.Add(-time.Second)
	evicting := withTaint(notReady(ready("b", 9)), v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, &recently)
	fleet := func(b Cluster) []Cluster { return []Cluster{ready("a", 9), b, ready("c", 9)} }
	withPrimary := func(d *Decision, primary string) *Decision { d.Primary = primary; return d }
	tests := []struct {
		name       string
		clusters   []Cluster
		previous   *Decision
		preferred  []string
		switchover bool
		to         []string
		progress   map[string]WALProgress
		noPrimary  []string
		want       string
	}{
		{name: "most replicas, ties by name", clusters: fleet(ready("b", 9)), previous: previous("a", 2, "b", 3, "c", 3), want: "b"},
		{name: "preference over size", clusters: fleet(ready("b", 9)), previous: previous("a", 2, "b", 3, "c", 3), preferred: []string{"c"}, want: "c"},
		{name: "a preference without a share is skipped", clusters: fleet(ready("b", 9)), previous: previous("a", 2, "b", 3, "c", 3), preferred: []string{"x", "a"}, want: "a"},
		{name: "the current primary stays while healthy, whatever the preference", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "a"), preferred: []string{"c"}, want: "a"},
		{name: "a switchover moves it to the first preferred cluster", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "a"), preferred: []string{"c"}, switchover: true, want: "c"},
		{name: "it leaves an unready cluster for the preference", clusters: fleet(notReady(ready("b", 9))),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "b"), preferred: []string{"b", "c"}, want: "c"},
		{name: "it leaves a cluster counting down a NoExecute toleration", clusters: fleet(evicting),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "b"), want: "c"},
		{name: "it moves to the share furthest in the WAL, before preference and size", clusters: fleet(notReady(ready("b", 9))),
			previous: withPrimary(previous("a", 1, "b", 3, "c", 3), "b"), preferred: []string{"b", "c"},
			progress: map[string]WALProgress{"a": {Received: 5 << 24, Replayed: 4 << 24}, "b": {Received: 9 << 24}, "c": {Received: 4 << 24, Replayed: 4 << 24}}, want: "a"},
		{name: "on equal received WAL, the one that replayed more", clusters: fleet(notReady(ready("b", 9))),
			previous: withPrimary(previous("a", 3, "b", 3, "c", 1), "b"),
			progress: map[string]WALProgress{"a": {Received: 5 << 24, Replayed: 3 << 24}, "c": {Received: 5 << 24, Replayed: 4 << 24}}, want: "c"},
		{name: "on equal progress, preference then size as before", clusters: fleet(notReady(ready("b", 9))),
			previous: withPrimary(previous("a", 3, "b", 3, "c", 1), "b"), preferred: []string{"c"},
			progress: map[string]WALProgress{"a": {Received: 5 << 24}, "c": {Received: 5 << 24}}, want: "c"},
		{name: "progress does not move a healthy primary", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "b"),
			progress: map[string]WALProgress{"a": {Received: 9 << 24}, "b": {Received: 1}}, want: "b"},
		{name: "a switchover to a set of clusters takes the best of them", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "a"), to: []string{"b", "c"}, preferred: []string{"c"}, want: "c"},
		{name: "among the set, the share furthest in the WAL first", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "a"), to: []string{"b", "c"}, preferred: []string{"c"},
			progress: map[string]WALProgress{"b": {Received: 9 << 24}, "c": {Received: 8 << 24}}, want: "b"},
		{name: "a switchover set comes before the preferred cluster", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "a"), to: []string{"b"}, preferred: []string{"c"}, switchover: true, want: "b"},
		{name: "a switchover set whose clusters cannot take it leaves the primary where it is", clusters: fleet(notReady(ready("b", 9))),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "a"), to: []string{"b", "x"}, want: "a"},
		{name: "the current primary in the switchover set stays", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "a"), to: []string{"a", "c"}, want: "a"},
		{name: "a switchover set does not steer a failover", clusters: fleet(notReady(ready("b", 9))),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "b"), to: []string{"a"},
			progress: map[string]WALProgress{"a": {Received: 1 << 24}, "c": {Received: 5 << 24}}, want: "c"},
		{name: "it leaves a cluster that may not hold the primary (its clocks disagree), though Ready", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "b"), noPrimary: []string{"b"},
			progress: map[string]WALProgress{"a": {Received: 5 << 24}, "c": {Received: 4 << 24}}, want: "a"},
		{name: "nor does a switchover to a preference take it there", clusters: fleet(ready("b", 9)),
			previous: withPrimary(previous("a", 2, "b", 3, "c", 3), "a"), preferred: []string{"b", "c"}, switchover: true,
			noPrimary: []string{"b"}, want: "c"},
		{name: "it stays where it may not be when no other holder is healthy", clusters: []Cluster{notReady(ready("b", 9)), ready("c", 9)},
			previous: withPrimary(previous("b", 3, "c", 3), "c"), noPrimary: []string{"c"}, want: "c"},
		{name: "it stays on an unhealthy cluster when no holder is healthy", clusters: []Cluster{notReady(ready("a", 9)), notReady(ready("b", 9))},
			previous: withPrimary(previous("a", 2, "b", 3), "a"), want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := dynamicPlacement()
			p.ClusterTolerations = []corev1.Toleration{toleration(v1alpha1.TaintClusterUnreachable, corev1.TaintEffectNoExecute, ptr.To[int64](30))}
			in := Input{Replicas: tt.previous.TotalReplicas(), Clusters: tt.clusters, Placement: p, Previous: tt.previous,
				PreferredPrimaries: tt.preferred, Switchover: tt.switchover, SwitchoverTo: tt.to, Progress: tt.progress, NoPrimary: tt.noPrimary}
			d := mustSchedule(t, in)
			if d.Primary != tt.want {
				t.Errorf("primary = %q, want %q (shares %s)", d.Primary, tt.want, sharesOf(d))
			}
		})
	}
}

func TestPrimaryFollowsItsClusterLosingItsShare(t *testing.T) {
	prev := previous("a", 2, "b", 2)
	prev.Primary = "b"
	d := mustSchedule(t, Input{Replicas: 4, Clusters: []Cluster{ready("a", 9), ready("c", 1)}, Placement: dynamicPlacement(), Previous: prev})
	if d.Primary != "a" {
		t.Errorf("primary = %q, want a (b is gone; a holds the most)", d.Primary)
	}
}
