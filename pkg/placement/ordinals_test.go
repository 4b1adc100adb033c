package placement

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// ranges renders shares as "a=0+2 b=1000+3" (start+count).
func ranges(d Decision) string {
	parts := make([]string, len(d.Shares))
	for i, s := range d.Shares {
		parts[i] = fmt.Sprintf("%s=%d+%d", s.Cluster, s.Ordinals.Start, s.Ordinals.Count)
	}
	return strings.Join(parts, " ")
}

func withRanges(pairs ...any) *Decision {
	d := &Decision{}
	for i := 0; i+2 < len(pairs); i += 3 {
		n := int32(pairs[i+2].(int))
		d.Shares = append(d.Shares, Share{Cluster: pairs[i].(string), Replicas: n,
			Ordinals: v1alpha1.OrdinalRange{Start: int32(pairs[i+1].(int)), Count: n}})
	}
	return d
}

func TestOrdinals(t *testing.T) {
	three := []Cluster{ready("a", 50), ready("b", 50), ready("c", 50)}
	tests := []struct {
		name     string
		clusters []Cluster
		replicas int32
		previous *Decision
		reserved []v1alpha1.OrdinalRange
		want     string
	}{
		{name: "fresh shares start at consecutive blocks", clusters: three, replicas: 7,
			want: "a=0+3 b=1000+2 c=2000+2"},
		{name: "unchanged shares keep their ranges", clusters: three, replicas: 7, previous: withRanges("a", 0, 3, "b", 1000, 2, "c", 2000, 2),
			want: "a=0+3 b=1000+2 c=2000+2"},
		{name: "shrinking keeps the start", clusters: three, replicas: 4, previous: withRanges("a", 0, 3, "b", 1000, 2, "c", 2000, 2),
			want: "a=0+2 b=1000+1 c=2000+1"},
		{name: "growing keeps the start when the block has room", clusters: three, replicas: 13, previous: withRanges("a", 0, 3, "b", 1000, 2, "c", 2000, 2),
			want: "a=0+5 b=1000+4 c=2000+4"},
		{name: "compact legacy ranges keep the start while they do not grow", clusters: three, replicas: 7, previous: withRanges("a", 0, 3, "b", 3, 2, "c", 5, 2),
			want: "a=0+3 b=3+2 c=5+2"},
		{name: "a grower that would run into its neighbour moves to a free block", clusters: three, replicas: 9, previous: withRanges("a", 0, 3, "b", 3, 2, "c", 5, 2),
			want: "a=1000+4 b=2000+3 c=5+2"},
		{name: "a new cluster never reuses a lost cluster's ordinals", clusters: []Cluster{ready("a", 50), ready("c", 50), ready("d", 50)}, replicas: 9,
			previous: withRanges("a", 0, 3, "b", 1000, 2, "c", 2000, 2), want: "a=0+5 c=2000+3 d=3000+1"},
		{name: "reserved ordinals are avoided", clusters: three, replicas: 3, reserved: []v1alpha1.OrdinalRange{{Start: 0, Count: 1}, {Start: 1500, Count: 1}},
			want: "a=2000+1 b=3000+1 c=4000+1"},
		{name: "overlapping previous ranges are repaired", clusters: three, replicas: 6, previous: withRanges("a", 0, 2, "b", 1, 2, "c", 2000, 2),
			want: "a=0+2 b=1000+2 c=2000+2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustSchedule(t, Input{Replicas: tt.replicas, Clusters: tt.clusters, Placement: dynamicPlacement(), Previous: tt.previous, ReservedOrdinals: tt.reserved})
			if got := ranges(d); got != tt.want {
				t.Errorf("ordinals = %s, want %s", got, tt.want)
			}
		})
	}
}
