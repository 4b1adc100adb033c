package placement

import (
	"errors"
	"testing"
)

// TestKarmadaExamples replays the division examples Karmada v1.16.0 documents: the API comments
// of DynamicWeightByAvailableReplicas and assignByStaticWeightStrategy, and the cases of
// pkg/scheduler/core/assignment_test.go. Each must produce Karmada's shares.
func TestKarmadaExamples(t *testing.T) {
	three := func(a, b, c int32) []Cluster {
		return []Cluster{ready("member1", a), ready("member2", b), ready("member3", c)}
	}
	tests := []struct {
		name     string
		in       Input
		want     string
		wantFail bool
	}{
		// Static weights (assignment_test.go Test_assignByStaticWeightStrategy and the doc comment).
		{name: "static 9, weight 1:2", want: "member1=3 member2=6",
			in: Input{Replicas: 9, Clusters: three(0, 0, 0)[:2], Placement: staticPlacement(map[string]int64{"member1": 1, "member2": 2})}},
		{name: "static 9, weight 1:3", want: "member1=2 member2=7",
			in: Input{Replicas: 9, Clusters: three(0, 0, 0)[:2], Placement: staticPlacement(map[string]int64{"member1": 1, "member2": 3})}},
		{name: "static 12, weight 3:2:1", want: "member1=6 member2=4 member3=2",
			in: Input{Replicas: 12, Clusters: three(0, 0, 0), Placement: staticPlacement(map[string]int64{"member1": 3, "member2": 2, "member3": 1})}},
		{name: "static 12, default weight", want: "member1=4 member2=4 member3=4",
			in: Input{Replicas: 12, Clusters: three(0, 0, 0), Placement: staticPlacement(nil)}},
		{name: "static 13, weight 3:2:1", want: "member1=7 member2=4 member3=2",
			in: Input{Replicas: 13, Clusters: three(0, 0, 0), Placement: staticPlacement(map[string]int64{"member1": 3, "member2": 2, "member3": 1})}},
		{name: "static 14, weight 3:2:1", want: "member1=7 member2=5 member3=2",
			in: Input{Replicas: 14, Clusters: three(0, 0, 0), Placement: staticPlacement(map[string]int64{"member1": 3, "member2": 2, "member3": 1})}},
		{name: "static, cluster without weight is ignored", want: "member1=2",
			in: Input{Replicas: 2, Clusters: three(0, 0, 0)[:2], Placement: staticPlacement(map[string]int64{"member1": 1})}},

		// Dynamic weight, first schedule (Test_dynamicScaleUp and the DynamicWeightFactor comment).
		{name: "dynamic 12, available 6:12:18", want: "member1=2 member2=4 member3=6",
			in: Input{Replicas: 12, Clusters: three(6, 12, 18), Placement: dynamicPlacement()}},
		{name: "dynamic 12, available 6:8:10", want: "member1=3 member2=4 member3=5",
			in: Input{Replicas: 12, Clusters: three(6, 8, 10), Placement: dynamicPlacement()}},
		{name: "dynamic 12, available 8:8:10", want: "member1=4 member2=4 member3=4",
			in: Input{Replicas: 12, Clusters: three(8, 8, 10), Placement: dynamicPlacement()}},
		{name: "dynamic 12, available 3:3:3 does not fit", wantFail: true,
			in: Input{Replicas: 12, Clusters: three(3, 3, 3), Placement: dynamicPlacement()}},

		// Dynamic weight, steady rescheduling (Test_dynamicScale).
		{name: "dynamic 12 -> 6 scales down by previous shares", want: "member1=1 member2=2 member3=3",
			in: Input{Replicas: 6, Clusters: three(1, 1, 1), Placement: dynamicPlacement(),
				Previous: previous("member1", 2, "member2", 4, "member3", 6)}},
		{name: "dynamic 12 -> 24 adds by available 10:10:10", want: "member1=6 member2=8 member3=10",
			in: Input{Replicas: 24, Clusters: three(10, 10, 10), Placement: dynamicPlacement(),
				Previous: previous("member1", 2, "member2", 4, "member3", 6)}},
		{name: "dynamic 12 -> 24 with available 1:1:1 does not fit", wantFail: true,
			in: Input{Replicas: 24, Clusters: three(1, 1, 1), Placement: dynamicPlacement(),
				Previous: previous("member1", 2, "member2", 4, "member3", 6)}},
		{name: "dynamic 12, member3 gone, member2 new", want: "member1=9 member2=3",
			in: Input{Replicas: 12, Clusters: []Cluster{ready("member1", 3), ready("member2", 3)}, Placement: dynamicPlacement(),
				Previous: previous("member1", 6, "member3", 6)}},

		// Aggregated, first schedule.
		{name: "aggregated 12, available 6:8:10", want: "member2=5 member3=7",
			in: Input{Replicas: 12, Clusters: three(6, 8, 10), Placement: aggregatedPlacement()}},
		{name: "aggregated 12, available 12:8:10", want: "member1=12",
			in: Input{Replicas: 12, Clusters: three(12, 8, 10), Placement: aggregatedPlacement()}},
		{name: "aggregated 12, available 3:3:3 does not fit", wantFail: true,
			in: Input{Replicas: 12, Clusters: three(3, 3, 3), Placement: aggregatedPlacement()}},

		// Aggregated, steady rescheduling.
		{name: "aggregated 12 -> 6", want: "member2=6",
			in: Input{Replicas: 6, Clusters: three(1, 1, 1), Placement: aggregatedPlacement(),
				Previous: previous("member1", 4, "member2", 8)}},
		{name: "aggregated 12 -> 8", want: "member2=8",
			in: Input{Replicas: 8, Clusters: three(100, 100, 0)[:2], Placement: aggregatedPlacement(),
				Previous: previous("member1", 4, "member2", 8)}},
		{name: "aggregated 12 -> 24, available 4:6:8", want: "member1=7 member2=12 member3=5",
			in: Input{Replicas: 24, Clusters: three(4, 6, 8), Placement: aggregatedPlacement(),
				Previous: previous("member1", 4, "member2", 8)}},
		{name: "aggregated 12 -> 24, available 6:6:20", want: "member1=10 member2=14",
			in: Input{Replicas: 24, Clusters: three(6, 6, 20), Placement: aggregatedPlacement(),
				Previous: previous("member1", 4, "member2", 8)}},
		{name: "aggregated 12 -> 24, available 1:1:1 does not fit", wantFail: true,
			in: Input{Replicas: 24, Clusters: three(1, 1, 1), Placement: aggregatedPlacement(),
				Previous: previous("member1", 4, "member2", 8)}},
		{name: "aggregated 12 -> 24, member2 gone, member4 new", want: "member1=7 member3=7 member4=10",
			in: Input{Replicas: 24, Clusters: []Cluster{ready("member1", 4), ready("member3", 8), ready("member4", 12)},
				Placement: aggregatedPlacement(), Previous: previous("member1", 4, "member2", 8)}},

		// Duplicated.
		{name: "duplicated", want: "member1=3 member2=3 member3=3",
			in: Input{Replicas: 3, Clusters: three(0, 0, 0), Placement: duplicatedPlacement()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantFail {
				tt.in.Now = t0
				_, err := Schedule(tt.in)
				var u *UnschedulableError
				if !errors.As(err, &u) {
					t.Fatalf("want an UnschedulableError, got %v", err)
				}
				return
			}
			d := mustSchedule(t, tt.in)
			if got := sharesOf(d); got != tt.want {
				t.Errorf("shares = %s, want %s", got, tt.want)
			}
		})
	}
}
