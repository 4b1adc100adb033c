package placement

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// The fuzz targets draw random inputs with genInput and check the engine's promises. Run one with
// e.g. `go test -run '^$' -fuzz '^FuzzInvariants$' -fuzztime 30s ./pkg/placement`.

func addSeeds(f *testing.F) {
	for i := range uint64(24) {
		f.Add(i, i*7919+1, uint8(i))
	}
}

// schedule runs the engine and fails the test on anything but success or an UnschedulableError:
// genInput only builds valid placements.
func schedule(t *testing.T, in Input) (Decision, bool) {
	t.Helper()
	d, err := Schedule(in)
	if err == nil {
		return d, true
	}
	var u *UnschedulableError
	if !errors.As(err, &u) {
		t.Fatalf("Schedule returned %v, want success or an UnschedulableError", err)
	}
	if msg := err.Error(); !strings.Contains(msg, " clusters fit") {
		t.Fatalf("unschedulable message %q does not summarise the fit", msg)
	}
	return Decision{}, false
}

// FuzzInvariants: every decision partitions the clusters, divided shares sum to spec.replicas,
// nothing lands on excluded, evicted, unready or tainted clusters beyond what they held, dynamic
// shares stay within capacity, ordinals never overlap and keep their start, and the primary
// follows its rules. Otherwise the result is an UnschedulableError.
func FuzzInvariants(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, _ uint8) {
		in := genInput(s1, s2)
		d, ok := schedule(t, in)
		if !ok {
			return
		}
		if problems := checkDecision(in, d); len(problems) > 0 {
			t.Fatalf("%s\ninput: %s\ndecision: %+v", strings.Join(problems, "\n"), describe(in), d)
		}
	})
}

// FuzzDeterministic: shuffling the clusters and the previous shares changes nothing, errors
// included.
func FuzzDeterministic(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, s3 uint8) {
		in := genInput(s1, s2)
		d1, err1 := Schedule(in)
		d2, err2 := Schedule(permuted(in, uint64(s3)+s1))
		if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("errors differ: %v vs %v", err1, err2)
		}
		if diff := sameDecision(d1, d2); diff != "" {
			t.Fatalf("permuting the input changed the decision: %s\ninput: %s", diff, describe(in))
		}
	})
}

// FuzzHouseMonotone: raising the replicas from the decision in force never lowers a share; for
// static weights, and dynamic weights without spread constraints, the decision is also monotone
// in the replicas for a fixed previous decision.
func FuzzHouseMonotone(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, extra uint8) {
		in := genInput(s1, s2)
		d1, ok := schedule(t, in)
		if !ok {
			return
		}
		raised := in
		raised.Replicas = in.Replicas + 1 + int32(extra%10)
		raised.Previous = &d1
		// Falling back to a later clusterAffinities term moves the replicas to another group by
		// design; monotonicity holds within a term.
		if d2, ok := schedule(t, raised); ok && d2.AffinityName == d1.AffinityName {
			if msg := notAtLeast(d2, d1); msg != "" {
				t.Fatalf("raising replicas %d -> %d from the decision in force lowered a share: %s\ninput: %s", in.Replicas, raised.Replicas, msg, describe(in))
			}
		}
		strat := resolveStrategy(&in.Placement)
		if len(in.Placement.ClusterAffinities) == 0 &&
			(strat == staticWeight || (strat == dynamicWeight && len(in.Placement.SpreadConstraints) == 0)) {
			raised.Previous = in.Previous
			if d3, ok := schedule(t, raised); ok {
				if msg := notAtLeast(d3, d1); msg != "" {
					t.Fatalf("%v: more replicas for the same previous decision lowered a share: %s\ninput: %s", strat, msg, describe(in))
				}
			}
		}
	})
}

// FuzzStable: a decision is a fixed point (scheduling again with it in force changes nothing);
// changing the replicas only adds or only removes; losing one cluster only moves that cluster's
// replicas.
func FuzzStable(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, k uint8) {
		in := genInput(s1, s2)
		d1, ok := schedule(t, in)
		if !ok {
			return
		}
		again := in
		again.Clusters = applied(in, d1)
		again.Previous = &d1
		again.Switchover, again.SwitchoverTo = false, nil // one-shot asks: the primary moves once
		if d, ok := schedule(t, again); !ok {
			if !spreadLeanedOnLostHolder(in, d1) {
				t.Fatalf("rescheduling with the decision in force failed\ninput: %s", describe(in))
			}
		} else if sharesAndPrimary(d) != sharesAndPrimary(d1) && d.AffinityName == d1.AffinityName {
			// A different clusterAffinities term is the documented exception: an earlier term that
			// could not hold the replicas (say, a cluster that may only hold filled its only slot)
			// can once that cluster has lost its share, and the first term that can hold wins.
			t.Fatalf("not a fixed point:\n%s\nvs\n%s\ninput: %s", sharesAndPrimary(d1), sharesAndPrimary(d), describe(in))
		}

		changed := again
		changed.Replicas = 1 + int32(k%20)
		if d, ok := schedule(t, changed); ok && d.AffinityName == d1.AffinityName {
			if changed.Replicas >= in.Replicas {
				if msg := notAtLeast(d, d1); msg != "" {
					t.Fatalf("scaling %d -> %d took replicas away: %s\ninput: %s", in.Replicas, changed.Replicas, msg, describe(in))
				}
			} else if msg := notAtLeast(d1, d); msg != "" {
				t.Fatalf("scaling %d -> %d added replicas somewhere: %s\ninput: %s", in.Replicas, changed.Replicas, msg, describe(in))
			}
		}

		if len(d1.Shares) == 0 {
			return
		}
		lost := d1.Shares[int(k)%len(d1.Shares)].Cluster
		without := again
		without.Clusters = nil
		for _, c := range again.Clusters {
			if c.Name != lost {
				without.Clusters = append(without.Clusters, c)
			}
		}
		if d, ok := schedule(t, without); ok && d.AffinityName == d1.AffinityName {
			if msg := notAtLeast(d, d1, lost); msg != "" {
				t.Fatalf("losing %s moved other replicas: %s\ninput: %s", lost, msg, describe(in))
			}
			if problems := checkDecision(without, d); len(problems) > 0 {
				t.Fatalf("after losing %s: %s", lost, strings.Join(problems, "\n"))
			}
		}
	})
}

// spreadLeanedOnLostHolder recognises the documented limit of the fixed point: spread constraints
// select clusters (Karmada's semantics), so a selection may count a cluster that can only hold
// replicas (unready, tainted) towards minGroups while the division scales its share down to zero.
// The next decision then no longer has that cluster and reports the constraint as unmet.
func spreadLeanedOnLostHolder(in Input, d Decision) bool {
	if len(in.Placement.SpreadConstraints) == 0 || in.Previous == nil {
		return false
	}
	for i := range in.Clusters {
		c := &in.Clusters[i]
		_, mayGrow := oracleHealth(c, in.Placement.ClusterTolerations, in.Now)
		if !mayGrow && in.Previous.ShareOf(c.Name) > 0 && d.ShareOf(c.Name) == 0 {
			return true
		}
	}
	return false
}

// extreme mutates a valid input into an invalid or extreme one, as a hand-edited status, a
// huge fleet's corner or a bad file for hub plan might give: replicas from negative to int32's
// maximum (the CRD's maximum included), an empty fleet, capacities, weights, previous shares and
// reserved ordinals at the limits of their types.
func extreme(in Input, s uint64, mode uint8) Input {
	r := rand.New(rand.NewPCG(s, uint64(mode)))
	pick := func(options ...int64) int64 { return options[r.IntN(len(options))] }
	if mode&1 != 0 {
		in.Replicas = int32(pick(-1, math.MinInt32, 0, 1, MaxReplicas, MaxReplicas+1, math.MaxInt32))
	}
	if mode&2 != 0 {
		in.Clusters = nil
	}
	if mode&4 != 0 {
		in.Clusters = append([]Cluster(nil), in.Clusters...)
		for i := range in.Clusters {
			in.Clusters[i].AvailableReplicas = int32(pick(-1, math.MinInt32, math.MaxInt32, MaxReplicas))
		}
	}
	if mode&8 != 0 && in.Placement.ReplicaScheduling != nil && in.Placement.ReplicaScheduling.WeightPreference != nil {
		list := append([]policyv1alpha1.StaticClusterWeight(nil), in.Placement.ReplicaScheduling.WeightPreference.StaticWeightList...)
		for i := range list {
			list[i].Weight = pick(-1, 0, math.MaxInt64, math.MaxInt32)
		}
		rs := *in.Placement.ReplicaScheduling
		wp := *rs.WeightPreference
		wp.StaticWeightList = list
		rs.WeightPreference = &wp
		in.Placement.ReplicaScheduling = &rs
	}
	if mode&16 != 0 && in.Previous != nil {
		prev := *in.Previous
		prev.Shares = append([]Share(nil), prev.Shares...)
		for i := range prev.Shares {
			prev.Shares[i].Replicas = int32(pick(-1, 0, math.MaxInt32, MaxReplicas))
			prev.Shares[i].Ordinals = v1alpha1.OrdinalRange{
				Start: int32(pick(-1, math.MinInt32, 0, math.MaxInt32-1, math.MaxInt32)),
				Count: int32(pick(-1, 0, 1, math.MaxInt32)),
			}
		}
		in.Previous = &prev
	}
	if mode&32 != 0 {
		in.ReservedOrdinals = []v1alpha1.OrdinalRange{
			{Start: int32(pick(-1, 0, math.MaxInt32-1)), Count: int32(pick(-1, 1, math.MaxInt32))},
			{Start: 0, Count: math.MaxInt32},
		}
	}
	if mode&64 != 0 && len(in.Placement.SpreadConstraints) > 0 {
		sc := append([]policyv1alpha1.SpreadConstraint(nil), in.Placement.SpreadConstraints...)
		for i := range sc {
			sc[i].MinGroups, sc[i].MaxGroups = int(pick(0, 1, math.MaxInt32)), int(pick(0, 1, math.MaxInt32))
		}
		in.Placement.SpreadConstraints = sc
	}
	return in
}

// FuzzExtremeInput: on invalid and extreme input the engine neither panics nor runs away; it
// refuses what it cannot interpret (ErrInvalidPlacement), says why it cannot place
// (UnschedulableError), or decides, and a decision it makes is one the API server accepts: shares
// that sum to spec.replicas within the CRD's bounds, ordinal ranges within int32 that never
// overlap.
func FuzzExtremeInput(f *testing.F) {
	for i := range uint64(24) {
		f.Add(i, i*7919+1, uint8(i*11))
	}
	f.Add(uint64(1), uint64(2), uint8(1|2))
	f.Add(uint64(3), uint64(4), uint8(0xff))
	f.Fuzz(func(t *testing.T, s1, s2 uint64, mode uint8) {
		in := extreme(genInput(s1, s2), s1^s2, mode)
		d, err := Schedule(in)
		if err != nil {
			var u *UnschedulableError
			if !errors.Is(err, ErrInvalidPlacement) && !errors.As(err, &u) {
				t.Fatalf("Schedule returned %v, want a decision, ErrInvalidPlacement or an UnschedulableError\ninput: %s", err, describe(in))
			}
			return
		}
		if in.Replicas < 0 || in.Replicas > MaxReplicas {
			t.Fatalf("decided for %d replicas, want ErrInvalidPlacement outside 0..%d", in.Replicas, MaxReplicas)
		}
		if resolveStrategy(&in.Placement) != duplicated && d.TotalReplicas() != in.Replicas {
			t.Fatalf("shares sum to %d, want %d\ninput: %s", d.TotalReplicas(), in.Replicas, describe(in))
		}
		var ranges []interval
		for _, sh := range d.Shares {
			if sh.Replicas < 1 || sh.Replicas > in.Replicas || sh.Ordinals.Count != sh.Replicas ||
				sh.Ordinals.Start < 0 || int64(sh.Ordinals.Start)+int64(sh.Ordinals.Count) > math.MaxInt32 {
				t.Fatalf("share %+v is out of bounds\ninput: %s", sh, describe(in))
			}
			ranges = append(ranges, rangeInterval(sh.Ordinals))
		}
		slices.SortFunc(ranges, func(a, b interval) int { return cmp.Compare(a.start, b.start) })
		for i := 1; i < len(ranges); i++ {
			if ranges[i].start < ranges[i-1].end {
				t.Fatalf("ordinal ranges overlap: %+v\ninput: %s", d.Shares, describe(in))
			}
		}
	})
}
