package placement

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// OrdinalBlock is the alignment of the ordinal range a cluster gets when it first receives a
// share: cluster ranges start at multiples of it (0, 1000, 2000, ...). It equals the largest
// spec.replicas the API accepts, so a share can grow to any size without running into the next
// cluster's range, and a cluster keeps its ordinal start for as long as it holds a share.
const OrdinalBlock = MaxReplicas

// MaxReplicas is the largest spec.replicas the DatabaseCluster CRD accepts; Schedule refuses more.
const MaxReplicas = 1000

// maxOrdinal bounds ordinal ranges: StatefulSet ordinals are int32.
const maxOrdinal = math.MaxInt32

// interval is a half-open ordinal interval [start, end).
type interval struct{ start, end int64 }

func rangeInterval(r v1alpha1.OrdinalRange) interval {
	return interval{int64(r.Start), int64(r.Start) + int64(r.Count)}
}

// dropOverlappingRanges makes the previous ranges pairwise disjoint before they are reused: when
// status holds overlapping ranges (it should not), the range that starts later, or sorts later by
// cluster name, is forgotten and its share gets a fresh range. with lists the nodes that have a
// range, in any order.
func (s *scheduler) dropOverlappingRanges(with []int32) {
	slices.SortFunc(with, func(a, b int32) int {
		if c := cmp.Compare(s.nodes[a].prevRange.Start, s.nodes[b].prevRange.Start); c != 0 {
			return c
		}
		return int(a) - int(b)
	})
	end := int64(-1)
	for _, i := range with {
		n := &s.nodes[i]
		if iv := rangeInterval(n.prevRange); iv.start < end {
			n.hasRange = false
		} else {
			end = iv.end
		}
	}
}

// assignOrdinals gives every share a fleet-wide unique ordinal range. shares are in name order
// and owners[k] is the node of shares[k].
//
//   - A share that shrank or kept its size keeps its start (its range stays inside the old one).
//   - A share that grew keeps its start when the extra ordinals are free.
//   - Any other share starts at the first free multiple of OrdinalBlock.
//
// "Free" excludes every range of the previous decision, including those of clusters that lost
// their share (their pods may still be terminating) and Input.ReservedOrdinals, so an ordinal
// never names two live pods at once.
//
// It fails when a fresh range would not fit below int32's maximum, which only previous or
// reserved ranges that fill the ordinal space (a corrupt status) can cause.
func (s *scheduler) assignOrdinals(shares []Share, owners []int32) error {
	occupied := s.occupiedOrdinals()
	s.ws.union = append(s.ws.union[:0], occupied...)
	union := mergeIntervals(s.ws.union)

	type grower struct {
		share int
		ext   interval
	}
	var growers []grower
	s.ws.fresh = grow(s.ws.fresh, len(shares))
	fresh := s.ws.fresh
	clear(fresh)
	for k := range shares {
		n := &s.nodes[owners[k]]
		c := shares[k].Replicas
		switch {
		case !n.hasRange:
			fresh[k] = true
		case c <= n.prevRange.Count:
			shares[k].Ordinals = v1alpha1.OrdinalRange{Start: n.prevRange.Start, Count: c}
		case int64(n.prevRange.Start)+int64(c) > maxOrdinal:
			fresh[k] = true
		default:
			old := rangeInterval(n.prevRange)
			growers = append(growers, grower{share: k, ext: interval{old.end, int64(n.prevRange.Start) + int64(c)}})
		}
	}
	// Growers keep their start when their extension is free. Extensions are checked in ordinal
	// order, so of two growers competing for the same ordinals the lower one keeps its start.
	slices.SortFunc(growers, func(a, b grower) int {
		if c := cmp.Compare(a.ext.start, b.ext.start); c != 0 {
			return c
		}
		return a.share - b.share
	})
	acceptedEnd := int64(-1)
	for _, g := range growers {
		if g.ext.start < acceptedEnd || overlapsAny(union, g.ext) {
			fresh[g.share] = true
			continue
		}
		acceptedEnd = g.ext.end
		n := &s.nodes[owners[g.share]]
		shares[g.share].Ordinals = v1alpha1.OrdinalRange{Start: n.prevRange.Start, Count: shares[g.share].Replicas}
		occupied = append(occupied, g.ext)
	}
	// Fresh ranges go to free blocks, in name order. All ranges kept above lie inside union or an
	// accepted extension, so the blocks avoid them.
	union = mergeIntervals(occupied)
	cursor, p := int64(0), 0
	for k := range shares {
		if !fresh[k] {
			continue
		}
		size := (int64(shares[k].Replicas) + OrdinalBlock - 1) / OrdinalBlock * OrdinalBlock
		for {
			lo := cursor * OrdinalBlock
			for p < len(union) && union[p].end <= lo {
				p++
			}
			if p < len(union) && union[p].start < lo+size {
				cursor = (union[p].end + OrdinalBlock - 1) / OrdinalBlock
				continue
			}
			break
		}
		if cursor*OrdinalBlock+int64(shares[k].Replicas) > maxOrdinal {
			return fmt.Errorf("%w: no free ordinal range for %d replicas on %s: the ranges in use and reserved fill the ordinals up to %d",
				ErrInvalidPlacement, shares[k].Replicas, shares[k].Cluster, int64(maxOrdinal))
		}
		shares[k].Ordinals = v1alpha1.OrdinalRange{Start: int32(cursor * OrdinalBlock), Count: shares[k].Replicas}
		cursor += size / OrdinalBlock
	}
	return nil
}

// occupiedOrdinals lists the ordinals no fresh range may use: every usable previous range, the
// previous ranges of clusters that left the input, and the reserved ranges.
func (s *scheduler) occupiedOrdinals() []interval {
	size := len(s.in.ReservedOrdinals)
	if s.in.Previous != nil {
		size += 2 * len(s.in.Previous.Shares) // their ranges, and room for growers' extensions
	}
	s.ws.occupied = grow(s.ws.occupied, size)
	out := s.ws.occupied[:0]
	for _, i := range s.ws.withRange {
		if s.nodes[i].hasRange { // not dropped for overlapping
			out = append(out, rangeInterval(s.nodes[i].prevRange))
		}
	}
	if s.in.Previous != nil {
		for k, sh := range s.in.Previous.Shares {
			if sh.Replicas > 0 && sh.Ordinals.Count > 0 && sh.Ordinals.Start >= 0 && !s.ws.known[k] {
				out = append(out, rangeInterval(sh.Ordinals))
			}
		}
	}
	for _, r := range s.in.ReservedOrdinals {
		if r.Count > 0 && r.Start >= 0 {
			out = append(out, rangeInterval(r))
		}
	}
	return out
}

// mergeIntervals sorts and merges intervals in place into disjoint ones.
func mergeIntervals(ivs []interval) []interval {
	slices.SortFunc(ivs, func(a, b interval) int { return cmp.Compare(a.start, b.start) })
	out := ivs[:0]
	for _, iv := range ivs {
		if len(out) > 0 && iv.start <= out[len(out)-1].end {
			out[len(out)-1].end = max(out[len(out)-1].end, iv.end)
			continue
		}
		out = append(out, iv)
	}
	return out
}

// overlapsAny reports whether iv overlaps any of the disjoint, sorted intervals.
func overlapsAny(sorted []interval, iv interval) bool {
	k, _ := slices.BinarySearchFunc(sorted, iv.start, func(x interval, start int64) int { return cmp.Compare(x.end, start+1) })
	// sorted[k] is the first interval ending after iv.start.
	return k < len(sorted) && sorted[k].start < iv.end
}
