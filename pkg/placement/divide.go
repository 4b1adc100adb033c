package placement

import (
	"fmt"
	"slices"
)

// divide gives each chosen cluster (node indexes in name order) its share, or returns why the
// replicas do not fit. Chosen clusters left without a replica get the most specific reason known;
// s.holders counts the others.
func (s *scheduler) divide(chosen []int32) string {
	var problem string
	switch s.strat {
	case duplicated:
		s.divideDuplicated(chosen)
	case staticWeight:
		problem = s.divideStatic(chosen)
	default:
		problem = s.divideSteady(chosen)
	}
	s.holders = 0
	for _, i := range chosen {
		n := &s.nodes[i]
		if n.share > 0 {
			s.holders++
			continue
		}
		if n.why != whyNone {
			continue
		}
		switch {
		case n.health.elig != eligible:
			n.exclude(n.health.why)
		case s.strat.capacityBound() && n.prev == 0 && s.steadyKept:
			n.exclude(whyAlreadyPlaced)
		}
	}
	return problem
}

// divideDuplicated gives every chosen cluster all replicas. A cluster that may only hold keeps
// what it has, never more: an unready or NoSchedule-tainted cluster gets no new pods.
func (s *scheduler) divideDuplicated(chosen []int32) {
	r := s.in.Replicas
	for _, i := range chosen {
		n := &s.nodes[i]
		if n.health.elig == eligible {
			n.share = r
		} else {
			n.share = min(r, n.prev)
		}
	}
}

// divideStatic divides by staticWeightList with the Webster method, as Karmada does, ignoring
// capacity. A cluster matched by several entries takes the highest weight; when no chosen cluster
// is matched at all, every cluster weighs 1. Clusters that may only hold are limited to their
// previous share. Previous shares only break exact ties, so a decision repeated on the same
// input is reproduced exactly.
func (s *scheduler) divideStatic(chosen []int32) string {
	// attempt worked out the weights of the candidates, chosen among them.
	var sum int64
	if s.weightOf != nil {
		for _, i := range chosen {
			sum += s.weightOf[i]
		}
	}
	// No entry matches a chosen cluster: each weighs 1.
	equal := sum == 0
	weight := func(i int32) int64 {
		if equal {
			return 1
		}
		return s.weightOf[i]
	}
	limit := func(n *node) int32 {
		if n.health.elig != eligible {
			return n.prev
		}
		return noLimit
	}
	// The clusters that may win a seat, in name order, each with its first-seat key. Only the
	// first spec.replicas of them can win one (see firstSeated), so over a large fleet the parties
	// are these alone. Sized up front, so the appends stay within the workspace's arrays.
	s.ws.weighted = grow(s.ws.weighted, len(chosen))
	s.ws.keys = grow(s.ws.keys, len(chosen))
	weighted, keys, fit := s.ws.weighted[:0], s.ws.keys[:0], len(s.nodes) <= indexMask
	for _, i := range chosen {
		n := &s.nodes[i]
		switch {
		case weight(i) == 0:
			n.exclude(whyNoWeight)
			continue
		case limit(n) == 0:
			continue
		}
		key, fits := firstSeatKey(weight(i), n.prev, i)
		weighted, keys, fit = append(weighted, i), append(keys, key), fit && fits
	}
	seats := int64(s.in.Replicas)
	if fit && seats < int64(len(weighted)) {
		s.ws.scratch = grow(s.ws.scratch, len(keys))
		radixSort(keys, s.ws.scratch, indexBits) // the keys end in increasing nodes
		weighted = weighted[:seats]
		for k := range weighted {
			weighted[k] = int32(keys[k] & indexMask)
		}
	}
	s.ws.parties = grow(s.ws.parties, len(weighted))
	parties := s.ws.parties[:0]
	for _, i := range weighted {
		n := &s.nodes[i]
		parties = append(parties, party{node: i, weight: weight(i), limit: limit(n), favoured: n.prev})
	}
	placed := apportion(parties, seats, s.ws)
	s.applySeats(parties, false)
	if placed < int64(s.in.Replicas) {
		return fmt.Sprintf("they can hold only %d of %d replicas: the weighted clusters that may gain replicas are none", placed, s.in.Replicas)
	}
	return ""
}

// staticWeight is the weight staticWeightList gives the cluster, 0 when no entry matches.
func (s *scheduler) staticWeight(c *Cluster) int64 {
	if lw := s.byLabel; lw != nil {
		if v, ok := c.Labels[lw.key]; ok {
			if i := slices.Index(lw.values, v); i >= 0 {
				return lw.weights[i]
			}
		}
		return 0
	}
	for _, rule := range s.statics { // heaviest first: the first match is the highest weight
		if rule.target.match(c) == matched {
			return rule.weight
		}
	}
	return 0
}

// divideSteady is Karmada's Steady assignment for dynamic weights and Aggregated: it starts from
// the previous shares of the chosen clusters and changes only the difference.
//   - Same total: the previous shares stay.
//   - Fewer replicas: the previous shares are scaled down by the Webster method with the previous
//     shares as weights, so no cluster gains and the result equals them at the old total.
//   - More replicas: the new replicas are divided by the Webster method with each cluster's
//     available replicas as weight, added to the previous shares. Weighting by availability
//     keeps every cluster within what it can take.
//
// Aggregated first narrows the clusters to as few as can take the replicas: clusters already
// holding replicas first, then the roomiest.
func (s *scheduler) divideSteady(chosen []int32) string {
	var held int64
	for _, i := range chosen {
		held += int64(s.nodes[i].prev)
	}
	want := int64(s.in.Replicas)
	s.steadyKept = want <= held
	switch {
	case want == held:
		for _, i := range chosen {
			s.nodes[i].share = s.nodes[i].prev
		}
		return ""
	case want < held:
		s.scaleDown(chosen, want)
		return ""
	default:
		return s.scaleUp(chosen, want-held)
	}
}

func (s *scheduler) scaleDown(chosen []int32, want int64) {
	holders := make([]int32, 0, len(chosen))
	for _, i := range chosen {
		if s.nodes[i].prev > 0 {
			holders = append(holders, i)
		}
	}
	if s.strat == aggregated {
		// Keep the biggest shares until they can hold the replicas.
		slices.SortFunc(holders, func(a, b int32) int {
			if pa, pb := s.nodes[a].prev, s.nodes[b].prev; pa != pb {
				return int(pb) - int(pa)
			}
			return int(a) - int(b)
		})
		var sum int64
		for k, i := range holders {
			sum += int64(s.nodes[i].prev)
			if sum >= want {
				holders = holders[:k+1]
				break
			}
		}
	}
	s.ws.parties = grow(s.ws.parties, len(holders))
	parties := s.ws.parties
	for k, i := range holders {
		p := s.nodes[i].prev
		parties[k] = party{node: i, weight: int64(p), limit: p, favoured: p}
	}
	apportion(parties, want, s.ws)
	s.applySeats(parties, false)
	for _, i := range chosen {
		if n := &s.nodes[i]; n.share == 0 && n.prev > 0 && s.strat == aggregated {
			n.exclude(whyNotNeeded)
		}
	}
}

func (s *scheduler) scaleUp(chosen []int32, extra int64) string {
	for _, i := range chosen {
		s.nodes[i].share = s.nodes[i].prev
	}
	targets := chosen
	var room int64
	for _, i := range chosen {
		room += int64(s.nodes[i].free)
	}
	if room < extra {
		return fmt.Sprintf("they can take only %d more replicas and %d are needed", room, extra)
	}
	if s.strat == aggregated {
		targets = s.fewestFor(chosen, extra)
	}
	s.ws.parties = grow(s.ws.parties, len(targets))
	parties := s.ws.parties[:0]
	for _, i := range targets {
		if f := s.nodes[i].free; f > 0 {
			parties = append(parties, party{node: i, weight: int64(f), limit: f})
		}
	}
	apportion(parties, extra, s.ws)
	s.applySeats(parties, true)
	for _, i := range chosen {
		n := &s.nodes[i]
		if n.share > 0 || n.why != whyNone {
			continue
		}
		switch {
		case n.free == 0 && n.health.elig == eligible:
			n.exclude(whyNoCapacity)
		case s.strat == aggregated:
			if _, found := slices.BinarySearch(targets, i); !found {
				n.exclude(whyNotNeeded)
			}
		}
	}
	return ""
}

// fewestFor picks, for Aggregated, the fewest clusters whose room takes `extra` replicas:
// clusters already holding replicas first, each group by room (most first), then by name. It
// returns them in name order.
func (s *scheduler) fewestFor(chosen []int32, extra int64) []int32 {
	order := slices.Clone(chosen)
	slices.SortFunc(order, func(a, b int32) int {
		na, nb := &s.nodes[a], &s.nodes[b]
		if ha, hb := na.prev > 0, nb.prev > 0; ha != hb {
			if ha {
				return -1
			}
			return 1
		}
		if na.free != nb.free {
			if na.free > nb.free {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	var sum int64
	for k, i := range order {
		sum += int64(s.nodes[i].free)
		if sum >= extra {
			order = order[:k+1]
			break
		}
	}
	slices.Sort(order)
	return order
}

// applySeats writes the apportioned seats onto the nodes, adding them to the previous share when
// add is set.
func (s *scheduler) applySeats(parties []party, add bool) {
	for k := range parties {
		n := &s.nodes[parties[k].node]
		if add {
			n.share += parties[k].seats
		} else {
			n.share = parties[k].seats
		}
	}
}
