package placement

import (
	"testing"
)

// TestHouseMonotoneSequences walks the replicas up from 1 to 40 and checks no share ever drops:
// from the decision in force for every strategy, and also from scratch for static and dynamic
// weights, where the divisor method makes the result a function of the replicas alone.
func TestHouseMonotoneSequences(t *testing.T) {
	fleet := []Cluster{ready("a", 7), ready("b", 13), ready("c", 2), ready("d", 29), unlimited("e")}
	limited := fleet[:4]
	tests := []struct {
		name      string
		clusters  []Cluster
		in        Input
		fromPrior bool
	}{
		{name: "static 5:3:1:1:1 from scratch", clusters: fleet, in: Input{Placement: staticPlacement(map[string]int64{"a": 5, "b": 3, "c": 1, "d": 1, "e": 1})}},
		{name: "static equal from scratch", clusters: fleet, in: Input{Placement: staticPlacement(nil)}},
		{name: "dynamic from scratch", clusters: limited, in: Input{Placement: dynamicPlacement()}},
		{name: "dynamic from the decision in force", clusters: limited, in: Input{Placement: dynamicPlacement()}, fromPrior: true},
		{name: "aggregated from the decision in force", clusters: limited, in: Input{Placement: aggregatedPlacement()}, fromPrior: true},
		{name: "duplicated from the decision in force", clusters: fleet, in: Input{Placement: duplicatedPlacement()}, fromPrior: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var last Decision
			for r := int32(1); r <= 40; r++ {
				in := tt.in
				in.Clusters, in.Replicas = tt.clusters, r
				if tt.fromPrior && r > 1 {
					in.Previous = &last
				}
				d := mustSchedule(t, in)
				if msg := notAtLeast(d, last); msg != "" {
					t.Fatalf("replicas %d -> %d: %s", r-1, r, msg)
				}
				last = d
			}
		})
	}
}

// TestStability: scaling moves only the difference and losing a cluster moves only its replicas.
func TestStability(t *testing.T) {
	fleet := []Cluster{ready("a", 20), ready("b", 20), ready("c", 20), ready("d", 20)}
	for _, tc := range []struct {
		name string
		in   Input
	}{
		{"static", Input{Placement: staticPlacement(map[string]int64{"a": 3, "b": 2, "c": 1, "d": 1})}},
		{"dynamic", Input{Placement: dynamicPlacement()}},
		{"aggregated", Input{Placement: aggregatedPlacement()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Clusters, in.Replicas = fleet, 17
			d1 := mustSchedule(t, in)

			again := in
			again.Previous = &d1
			if d := mustSchedule(t, again); sharesAndPrimary(d) != sharesAndPrimary(d1) {
				t.Errorf("not a fixed point: %s -> %s", sharesAndPrimary(d1), sharesAndPrimary(d))
			}

			up := again
			up.Replicas = 23
			if d := mustSchedule(t, up); notAtLeast(d, d1) != "" {
				t.Errorf("scale up took replicas: %s", notAtLeast(d, d1))
			}
			down := again
			down.Replicas = 9
			if d := mustSchedule(t, down); notAtLeast(d1, d) != "" {
				t.Errorf("scale down added replicas: %s", notAtLeast(d1, d))
			}

			lost := d1.Shares[0].Cluster
			without := again
			without.Clusters = nil
			for _, c := range fleet {
				if c.Name != lost {
					without.Clusters = append(without.Clusters, c)
				}
			}
			d := mustSchedule(t, without)
			if msg := notAtLeast(d, d1, lost); msg != "" {
				t.Errorf("losing %s moved other replicas: %s", lost, msg)
			}
		})
	}
}

// TestStaticTieBreaksFollowThePreviousDecision: with equal weights and an odd count the spare
// replica stays where it is, rather than going to the first name.
func TestStaticTieBreaksFollowThePreviousDecision(t *testing.T) {
	in := Input{Replicas: 3, Clusters: []Cluster{ready("a", 0), ready("b", 0)}, Placement: staticPlacement(nil)}
	if got := sharesOf(mustSchedule(t, in)); got != "a=2 b=1" {
		t.Errorf("fresh: %s, want a=2 b=1 (ties go to the first name)", got)
	}
	in.Previous = previous("a", 1, "b", 2)
	if got := sharesOf(mustSchedule(t, in)); got != "a=1 b=2" {
		t.Errorf("with b holding 2: %s, want a=1 b=2", got)
	}
}

func TestDynamicWeightStaysWithinCapacity(t *testing.T) {
	d := mustSchedule(t, Input{Replicas: 10, Clusters: []Cluster{ready("a", 1), ready("b", 2), ready("c", 100)}, Placement: dynamicPlacement()})
	if d.ShareOf("a") > 1 || d.ShareOf("b") > 2 {
		t.Errorf("shares exceed capacity: %s", sharesOf(d))
	}
	if e, _ := exclusionOf(mustSchedule(t, Input{Replicas: 2, Clusters: []Cluster{ready("a", 0), ready("b", 5)}, Placement: dynamicPlacement()}), "a"); e.Reason != ReasonNoCapacity {
		t.Errorf("a full cluster is excluded for %q, want %q", e.Reason, ReasonNoCapacity)
	}
}

func TestUnlimitedClustersShareEqually(t *testing.T) {
	d := mustSchedule(t, Input{Replicas: 7, Clusters: []Cluster{unlimited("a"), unlimited("b"), unlimited("c")}, Placement: dynamicPlacement()})
	if got := sharesOf(d); got != "a=3 b=2 c=2" {
		t.Errorf("shares = %s, want a=3 b=2 c=2", got)
	}
}

func TestDuplicatedHoldOnlyClusterKeepsItsShare(t *testing.T) {
	d := mustSchedule(t, Input{Replicas: 5, Clusters: []Cluster{ready("a", 0), notReady(ready("b", 0))}, Placement: duplicatedPlacement(),
		Previous: previous("a", 3, "b", 3)})
	if got := sharesOf(d); got != "a=5 b=3" {
		t.Errorf("shares = %s, want a=5 b=3: an unready cluster keeps its pods but gets no new ones", got)
	}
}

func TestSteadyExplainsClustersLeftOut(t *testing.T) {
	d := mustSchedule(t, Input{Replicas: 4, Clusters: []Cluster{ready("a", 9), ready("b", 9), ready("c", 9)}, Placement: dynamicPlacement(),
		Previous: previous("a", 2, "b", 2)})
	if e, _ := exclusionOf(d, "c"); e.Reason != ReasonAlreadyPlaced {
		t.Errorf("c excluded for %q, want %q", e.Reason, ReasonAlreadyPlaced)
	}
	d = mustSchedule(t, Input{Replicas: 4, Clusters: []Cluster{ready("a", 9), ready("b", 1)}, Placement: aggregatedPlacement()})
	if e, _ := exclusionOf(d, "b"); e.Reason != ReasonNotNeeded {
		t.Errorf("b excluded for %q, want %q", e.Reason, ReasonNotNeeded)
	}
	d = mustSchedule(t, Input{Replicas: 1, Clusters: []Cluster{ready("a", 0), ready("b", 0)}, Placement: staticPlacement(map[string]int64{"a": 5, "b": 1})})
	if e, _ := exclusionOf(d, "b"); e.Reason != ReasonRoundedToZero {
		t.Errorf("b excluded for %q, want %q", e.Reason, ReasonRoundedToZero)
	}
	d = mustSchedule(t, Input{Replicas: 1, Clusters: []Cluster{ready("a", 0), ready("b", 0)}, Placement: staticPlacement(map[string]int64{"a": 5})})
	if e, _ := exclusionOf(d, "b"); e.Reason != ReasonNoWeight {
		t.Errorf("b excluded for %q, want %q", e.Reason, ReasonNoWeight)
	}
}

func TestDeterministicWhateverTheOrder(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		in := genInput(seed, seed+1)
		d1, err1 := Schedule(in)
		for k := uint64(0); k < 3; k++ {
			d2, err2 := Schedule(permuted(in, seed*3+k))
			if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
				t.Fatalf("seed %d: errors differ: %v vs %v", seed, err1, err2)
			}
			if diff := sameDecision(d1, d2); diff != "" {
				t.Fatalf("seed %d: %s", seed, diff)
			}
		}
	}
}
