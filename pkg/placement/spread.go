package placement

import (
	"fmt"
	"slices"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
)

// spreadSpec is the placement's spreadConstraints, compiled.
type spreadSpec struct {
	// selects is false when no constraint selects clusters: none are given, or Karmada ignores
	// them because static weights decide (spreadIgnored).
	selects bool
	// clusterMin and clusterMax bound the number of chosen clusters; clusterMax 0 means no bound.
	clusterMin, clusterMax int
	// topology holds the provider, region and zone constraints, coarsest first.
	topology []topologyConstraint
}

type topologyConstraint struct {
	field    field
	min, max int // max 0 means no bound
	// missing explains the exclusion of clusters that leave the field empty.
	missing explID
}

// compileSpread reads spreadConstraints with Karmada's defaults: an empty spreadByField is
// "cluster" and minGroups 0 is 1. maxGroups 0 (unset) means no upper bound. Without a cluster
// constraint the number of clusters is not bounded.
func compileSpread(p *policyv1alpha1.Placement) (spreadSpec, error) {
	spec := spreadSpec{clusterMin: 1}
	// seen and byField are indexed cluster, provider, region, zone.
	var seen [4]bool
	var byField [4]topologyConstraint
	for i, c := range p.SpreadConstraints {
		if c.SpreadByLabel != "" {
			return spec, fmt.Errorf("%w: spreadConstraints[%d].spreadByLabel is not supported: use spreadByField", ErrInvalidPlacement, i)
		}
		if c.MinGroups < 0 || c.MaxGroups < 0 {
			return spec, fmt.Errorf("%w: spreadConstraints[%d]: minGroups and maxGroups must not be negative", ErrInvalidPlacement, i)
		}
		if c.MaxGroups > 0 && c.MinGroups > c.MaxGroups {
			return spec, fmt.Errorf("%w: spreadConstraints[%d]: minGroups %d exceeds maxGroups %d", ErrInvalidPlacement, i, c.MinGroups, c.MaxGroups)
		}
		by := c.SpreadByField
		if by == "" {
			by = policyv1alpha1.SpreadByFieldCluster
		}
		minGroups := max(c.MinGroups, 1)
		var k int
		switch by {
		case policyv1alpha1.SpreadByFieldCluster:
			k = 0
			spec.clusterMin, spec.clusterMax = minGroups, c.MaxGroups
		case policyv1alpha1.SpreadByFieldProvider:
			k = 1
			byField[k] = topologyConstraint{field: fieldProvider, min: minGroups, max: c.MaxGroups, missing: whyMissingProvider}
		case policyv1alpha1.SpreadByFieldRegion:
			k = 2
			byField[k] = topologyConstraint{field: fieldRegion, min: minGroups, max: c.MaxGroups, missing: whyMissingRegion}
		case policyv1alpha1.SpreadByFieldZone:
			k = 3
			byField[k] = topologyConstraint{field: fieldZone, min: minGroups, max: c.MaxGroups, missing: whyMissingZone}
		default:
			return spec, fmt.Errorf("%w: spreadConstraints[%d].spreadByField %q is not supported: use cluster, region, zone or provider", ErrInvalidPlacement, i, by)
		}
		if seen[k] {
			return spec, fmt.Errorf("%w: spreadConstraints[%d]: spreadByField %q appears more than once", ErrInvalidPlacement, i, by)
		}
		seen[k] = true
	}
	for k := 1; k < len(byField); k++ { // coarsest first
		if seen[k] {
			spec.topology = append(spec.topology, byField[k])
		}
	}
	spec.selects = len(p.SpreadConstraints) > 0 && !spreadIgnored(p)
	return spec, nil
}

// missingField explains why a cluster lacks a field a constraint spreads by, or returns whyNone.
// It applies even when the constraints do not select, as Karmada's filter plugin does.
func (s *spreadSpec) missingField(c *Cluster) explID {
	for i := range s.topology {
		if s.topology[i].field.of(c) == "" {
			return s.topology[i].missing
		}
	}
	return whyNone
}

// selection is the state of one run of selectBySpread: the candidates ranked, which of them
// are taken, and what the taken ones add up to.
// Its methods take the scheduler as an argument rather than a field, so the scheduler stays on
// the stack.
type selection struct {
	ranked []int32
	// taken[r] says ranked[r] is chosen.
	taken    []bool
	chosen   []int32
	capacity int64
	// inGroup[t][g] says group g of topology constraint t has a chosen cluster; groups[t] counts
	// them. There is a topology constraint per field at most.
	inGroup [len(fieldNames)][]bool
	groups  [len(fieldNames)]int
}

// initGroups prepares group: once per decision, every node's group is unknown (0). The arrays
// and maps are the workspace's.
func (s *scheduler) initGroups() {
	if s.groupOf != nil {
		return
	}
	nt := len(s.spread.topology)
	s.ws.group = grow(s.ws.group, nt)
	s.ws.groupIDs = grow(s.ws.groupIDs, nt)
	for t := range nt {
		s.ws.group[t] = grow(s.ws.group[t], len(s.nodes))
		clear(s.ws.group[t])
		if s.ws.groupIDs[t] == nil {
			s.ws.groupIDs[t] = map[string]int32{}
		}
	}
	s.groupOf, s.groupIDs = s.ws.group, s.ws.groupIDs
}

// group is node n's group for topology constraint t: its value of the field, interned as a small
// integer so that selection tests group membership by indexing. Values are interned on first use
// because selection usually stops after the best-ranked few hundred clusters, so most clusters of
// a large fleet are never hashed.
func (s *scheduler) group(t int, n int32) int32 {
	if g := s.groupOf[t][n]; g > 0 {
		return g - 1
	}
	v := s.spread.topology[t].field.of(s.cluster(n))
	ids := s.groupIDs[t]
	g, known := ids[v]
	if !known {
		g = int32(len(ids))
		ids[v] = g
	}
	s.groupOf[t][n] = g + 1
	return g
}

// selectBySpread chooses the clusters the spread constraints allow, from cands (node indexes in
// name order). It returns them in name order, or a problem when the constraints cannot be met.
//
// Clusters are ranked as Karmada's scheduler ranks them: clusters holding replicas first (Karmada's
// ClusterLocality score), then by the replicas they can hold, then by name. Then:
//  0. clusters holding replicas are kept, as far as every maxGroups allows;
//  1. the best-ranked clusters that add a group still below its minGroups are taken, never
//     exceeding any maxGroups, until every minGroups is met: like Karmada, the fewest groups;
//  2. clusters inside the chosen groups are added until the cluster maxGroups;
//  3. when the clusters are still fewer than the cluster minGroups, or a capacity-bound strategy
//     needs more room than they have, clusters in further groups are added (within maxGroups),
//     and those groups are filled as in 2;
//  4. without topology constraints, a full set still short of room swaps its lowest-ranked
//     clusters for bigger ones (Karmada's selectClustersByAvailableResource).
//
// need is the replicas the chosen clusters should be able to hold, or -1 when capacity does not
// matter.
func (s *scheduler) selectBySpread(cands []int32, need int64) ([]int32, string) {
	spec := &s.spread
	sel := s.newSelection(cands)
	// 0. Keep the clusters holding replicas, as far as the maxima allow: moving replicas only
	// to satisfy a preference for fewer groups would break stability.
	sel.keepHolders(s)
	// 1. Meet every minGroups with the best-ranked clusters.
	sel.meetMinGroups(s)
	for t := range spec.topology {
		if c := &spec.topology[t]; sel.groups[t] < c.min {
			return nil, s.groupShortfall(cands, t, sel.groups[t])
		}
	}
	// 2. Fill the chosen groups.
	sel.fill(s)
	// 3. Open more groups when clusters or room are short, and fill them too, so that choosing
	// again from the chosen clusters gives the same clusters.
	if sel.openGroups(s, need) {
		sel.fill(s)
	}
	// 4. Swap for room.
	if need >= 0 && sel.capacity < need && len(spec.topology) == 0 {
		s.swapForRoom(&sel, need)
	}
	if len(sel.chosen) < spec.clusterMin {
		return nil, fmt.Sprintf("spreadConstraints need at least %d clusters and only %d qualify", spec.clusterMin, len(sel.chosen))
	}
	slices.Sort(sel.chosen)
	return sel.chosen, ""
}

// newSelection starts a selection from cands, ranked, nothing taken; its arrays are the
// workspace's.
func (s *scheduler) newSelection(cands []int32) selection {
	s.initGroups()
	ranked := s.ranked(cands)
	s.ws.chosen = grow(s.ws.chosen, len(ranked))
	s.ws.taken = grow(s.ws.taken, len(ranked))
	sel := selection{ranked: ranked, taken: s.ws.taken, chosen: s.ws.chosen[:0]}
	clear(sel.taken)
	s.ws.inGroup = grow(s.ws.inGroup, len(s.spread.topology))
	for t := range s.spread.topology {
		// Group ids are below the number of nodes; they are interned as selection goes.
		s.ws.inGroup[t] = grow(s.ws.inGroup[t], len(s.nodes))
		sel.inGroup[t] = s.ws.inGroup[t]
		clear(sel.inGroup[t])
	}
	return sel
}

// full says the cluster maxGroups is reached.
func (sel *selection) full(s *scheduler) bool {
	return s.spread.clusterMax > 0 && len(sel.chosen) >= s.spread.clusterMax
}

// take chooses ranked[r].
func (sel *selection) take(s *scheduler, r int) {
	sel.taken[r] = true
	n := sel.ranked[r]
	sel.chosen = append(sel.chosen, n)
	sel.capacity += s.nodes[n].capacity()
	for t := range s.spread.topology {
		if g := s.group(t, n); !sel.inGroup[t][g] {
			sel.inGroup[t][g] = true
			sel.groups[t]++
		}
	}
}

// opens reports whether the cluster adds a group below minGroups, and whether it stays within
// every maxGroups.
func (sel *selection) opens(s *scheduler, n int32) (useful, allowed bool) {
	allowed = true
	for t := range s.spread.topology {
		if sel.inGroup[t][s.group(t, n)] {
			continue
		}
		c := &s.spread.topology[t]
		if sel.groups[t] < c.min {
			useful = true
		}
		if c.max > 0 && sel.groups[t] >= c.max {
			allowed = false
		}
	}
	return useful, allowed
}

// within says the cluster adds no group.
func (sel *selection) within(s *scheduler, n int32) bool {
	for t := range s.spread.topology {
		if !sel.inGroup[t][s.group(t, n)] {
			return false
		}
	}
	return true
}

// unmet says some minGroups is not met yet.
func (sel *selection) unmet(s *scheduler) bool {
	for t := range s.spread.topology {
		if sel.groups[t] < s.spread.topology[t].min {
			return true
		}
	}
	return false
}

// keepHolders takes the clusters holding replicas (they rank first) as far as every maxGroups
// allows.
func (sel *selection) keepHolders(s *scheduler) {
	for r, n := range sel.ranked {
		if s.nodes[n].prev == 0 || sel.full(s) {
			break // holders rank first
		}
		if _, allowed := sel.opens(s, n); allowed {
			sel.take(s, r)
		}
	}
}

// meetMinGroups takes the best-ranked clusters that add a group still below its minGroups, within
// every maxGroups, until every minGroups is met.
func (sel *selection) meetMinGroups(s *scheduler) {
	for r, n := range sel.ranked {
		if sel.full(s) || !sel.unmet(s) {
			break
		}
		if useful, allowed := sel.opens(s, n); !sel.taken[r] && useful && allowed {
			sel.take(s, r)
		}
	}
}

// fill adds the clusters inside the chosen groups, best-ranked first, until the cluster
// maxGroups.
func (sel *selection) fill(s *scheduler) {
	for r, n := range sel.ranked {
		if sel.full(s) {
			break
		}
		if !sel.taken[r] && sel.within(s, n) {
			sel.take(s, r)
		}
	}
}

// openGroups adds clusters in further groups (within maxGroups) while the clusters are fewer than
// the cluster minGroups or hold less room than need (-1: room does not matter). It reports
// whether it added any.
func (sel *selection) openGroups(s *scheduler, need int64) bool {
	short := func() bool {
		return len(sel.chosen) < s.spread.clusterMin || (need >= 0 && sel.capacity < need)
	}
	opened := false
	for r, n := range sel.ranked {
		if !short() || sel.full(s) {
			break
		}
		if _, allowed := sel.opens(s, n); !sel.taken[r] && allowed {
			sel.take(s, r)
			opened = true
		}
	}
	return opened
}

// ranked orders candidates for selection: holders of replicas first, bigger shares first (so a
// tightened constraint moves as few replicas as possible), then more room, then name. Each
// candidate becomes one integer key, radix-sorted; shares and room above 2^20-1 (a million
// replicas) rank as equal.
func (s *scheduler) ranked(cands []int32) []int32 {
	const (
		field = 20
		clamp = 1<<field - 1
	)
	if len(s.nodes) > indexMask {
		out := slices.Clone(cands)
		slices.SortFunc(out, s.rankOrder)
		return out
	}
	s.ws.keys = grow(s.ws.keys, len(cands))
	keys := s.ws.keys
	for k, i := range cands {
		n := &s.nodes[i]
		prev := uint64(clamp - min(int64(n.prev), clamp))
		room := uint64(clamp - min(n.capacity(), clamp))
		keys[k] = prev<<(2*field+4) | room<<indexBits | uint64(i)
	}
	s.ws.scratch = grow(s.ws.scratch, len(cands))
	// cands are in index order, so the keys already are in order of their low indexBits bits.
	radixSort(keys, s.ws.scratch, indexBits)
	s.ws.ranked = grow(s.ws.ranked, len(cands))
	out := s.ws.ranked
	for k, key := range keys {
		out[k] = int32(key & indexMask)
	}
	return out
}

// rankOrder is the order of ranked, for fleets too large for integer keys.
func (s *scheduler) rankOrder(a, b int32) int {
	na, nb := &s.nodes[a], &s.nodes[b]
	if na.prev != nb.prev {
		if na.prev > nb.prev {
			return -1
		}
		return 1
	}
	if ca, cb := na.capacity(), nb.capacity(); ca != cb {
		if ca > cb {
			return -1
		}
		return 1
	}
	return int(a) - int(b)
}

// swapForRoom replaces chosen clusters, lowest-ranked first, by the unchosen cluster with the most
// room when that is more, until the room suffices. Clusters holding replicas are never swapped
// out, not even those that may not grow: taking their replicas to make room for more would break
// house monotonicity; the placement is unschedulable instead.
func (s *scheduler) swapForRoom(sel *selection, need int64) {
	ranked, taken := sel.ranked, sel.taken
	pos := make(map[int32]int, len(ranked))
	for r, n := range ranked {
		pos[n] = r
	}
	for j := len(sel.chosen) - 1; j >= 0 && sel.capacity < need; j-- {
		out := sel.chosen[j]
		if s.nodes[out].prev > 0 {
			continue
		}
		best, bestRoom := -1, s.nodes[out].capacity()
		for r, n := range ranked {
			if !taken[r] && s.nodes[n].capacity() > bestRoom {
				best, bestRoom = r, s.nodes[n].capacity()
			}
		}
		if best < 0 {
			continue
		}
		taken[pos[out]] = false
		taken[best] = true
		sel.capacity += bestRoom - s.nodes[out].capacity()
		sel.chosen[j] = ranked[best]
	}
}

// groupShortfall explains an unmet minGroups of topology constraint t.
func (s *scheduler) groupShortfall(cands []int32, ti int, chosen int) string {
	t := &s.spread.topology[ti]
	distinct := map[int32]struct{}{}
	for _, n := range cands {
		distinct[s.group(ti, n)] = struct{}{}
	}
	noun := t.field.String() + "s"
	if len(distinct) < t.min {
		return fmt.Sprintf("spreadConstraints need at least %d %s and they span %d", t.min, noun, len(distinct))
	}
	return fmt.Sprintf("spreadConstraints need at least %d %s and only %d can be chosen within the other constraints", t.min, noun, chosen)
}
