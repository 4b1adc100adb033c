package placement

import (
	"fmt"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Schedule decides which clusters run how many replicas of one DatabaseCluster. It is a pure
// function of in: the same input, in any order, gives the same decision. It returns an
// *UnschedulableError when the placement cannot be met, and an error wrapping ErrInvalidPlacement
// for input it cannot interpret.
//
// Its work is bounded by the number of clusters and MaxReplicas: more replicas than that are
// refused, as the API server refuses them.
func Schedule(in Input) (Decision, error) {
	if in.Replicas < 0 {
		return Decision{}, fmt.Errorf("%w: replicas %d is negative", ErrInvalidPlacement, in.Replicas)
	}
	if in.Replicas > MaxReplicas {
		return Decision{}, fmt.Errorf("%w: replicas %d is more than %d, the most a DatabaseCluster may have", ErrInvalidPlacement, in.Replicas, MaxReplicas)
	}
	placement, err := compile(&in.Placement, in.defaultToleration())
	if err != nil {
		return Decision{}, err
	}
	s := &scheduler{in: in, compiled: placement, ws: workspaces.Get().(*workspace)}
	defer s.ws.release()
	s.ws.whys.reset()
	if s.ws.taints == nil {
		s.ws.taints = map[taintKey]explID{}
	}
	s.texts.whys, s.texts.cache = &s.ws.whys, s.ws.taints
	if err := s.buildNodes(); err != nil {
		return Decision{}, err
	}
	if in.Replicas == 0 {
		for i := range s.nodes {
			s.nodes[i].exclude(whyNoReplicas)
		}
		return s.decision("")
	}
	var first, last *UnschedulableError
	for i := range s.terms {
		failure := s.attempt(&s.terms[i])
		if failure == nil {
			return s.decision(s.terms[i].name)
		}
		if first == nil {
			first = failure
		} else {
			last.Next = failure
		}
		last = failure
	}
	return Decision{}, first
}

// scheduler holds one decision's working state.
type scheduler struct {
	in Input // a copy, so that the scheduler (on the stack) refers to no Input on the heap
	*compiled
	// nodes are the input clusters in name order; every index below refers to this slice.
	nodes []node
	ws    *workspace
	texts taintTexts
	// groupOf[t][node] is 1 + the node's group id for topology constraint t, 0 until group interns
	// it with groupIDs[t].
	groupOf  [][]int32
	groupIDs []map[string]int32
	// weightOf[node] is the node's staticWeightList weight, -1 until attempt works it out; nil
	// without a staticWeightList.
	weightOf []int64
	// steadyKept is set when Steady division kept or shrank the previous shares, so clusters
	// without one got nothing by design.
	steadyKept bool
	// holders counts the clusters divide gave a share.
	holders int
}

// node is one cluster and what this decision derived about it. It is kept small, and free of
// pointers (see explID): a decision over thousands of clusters walks these many times.
type node struct {
	prevRange v1alpha1.OrdinalRange
	// free is how many replicas the cluster may gain: 0 when it may only hold, spec.replicas when
	// capacity does not limit it (Karmada's rule for unbounded estimates).
	free    int32
	cluster int32 // index in Input.Clusters
	prev    int32 // previous share, 0 if none
	// share is the result of the current attempt; why explains a cluster left without one.
	share  int32
	why    explID
	health verdict
	// hasRange says prevRange is usable: positive count, no overlap with another previous range.
	hasRange bool
	// joined says a previous share entry named the cluster; later entries for it are ignored.
	joined bool
}

// capacity is how many replicas of this database the cluster could hold in all (Karmada's
// AvailableReplicas: assigned plus allocatable).
func (n *node) capacity() int64 { return int64(n.prev) + int64(n.free) }

func (n *node) exclude(why explID) {
	n.share = 0
	n.why = why
}

// cluster is the input cluster of node i.
func (s *scheduler) cluster(i int32) *Cluster { return &s.in.Clusters[s.nodes[i].cluster] }

// why is the explanation numbered id.
func (s *scheduler) why(id explID) *explanation { return &s.ws.whys[id] }

// termWhy numbers the explanation of mismatch k of term t, building it the first time it is met.
func (s *scheduler) termWhy(t *term, k mismatch) explID {
	if t.whys[k] == whyNone {
		t.whys[k] = s.ws.whys.add(t.aff.explain(k))
	}
	return t.whys[k]
}

// buildNodes orders the clusters by name, rejects duplicates, joins the previous decision and
// judges each cluster's health once for all affinity terms.
func (s *scheduler) buildNodes() error {
	in := &s.in
	order, dup := nameOrder(in.Clusters, s.ws)
	if dup >= 0 {
		return fmt.Errorf("%w: cluster %q appears more than once", ErrInvalidPlacement, in.Clusters[dup].Name)
	}
	s.ws.nodes = grow(s.ws.nodes, len(order))
	s.nodes = s.ws.nodes
	for i, o := range order {
		n, c := &s.nodes[i], &in.Clusters[o]
		*n = node{cluster: o}
		if c.Ready && len(c.Taints) == 0 { // eligible, as the zero verdict says: no call
			n.free = s.room(c)
		} else {
			s.judge(n, c) // as holding nothing: joinPrevious judges holders again
		}
	}
	if len(s.statics) > 0 {
		s.ws.weightOf = grow(s.ws.weightOf, len(s.nodes))
		s.weightOf = s.ws.weightOf
		for i := range s.weightOf {
			s.weightOf[i] = -1
		}
	}
	s.joinPrevious()
	return nil
}

// judge works out the node's health and how many replicas it may gain, given its previous share.
func (s *scheduler) judge(n *node, c *Cluster) {
	if !c.Ready || len(c.Taints) > 0 { // otherwise eligible, as the zero verdict says
		n.health = judgeHealth(c, n.prev > 0, s.tolerations, s.in.Now, &s.texts)
		if n.health.elig != eligible {
			n.free = 0
			return
		}
	}
	n.free = s.room(c)
}

// room is how many replicas an eligible cluster may gain.
func (s *scheduler) room(c *Cluster) int32 {
	if c.Unlimited {
		return s.in.Replicas
	}
	return max(c.AvailableReplicas, 0)
}

// joinPrevious copies the previous shares onto the nodes. Previous comes from status, which the
// engine does not trust: unknown clusters, non-positive shares and duplicates are ignored (the
// first entry for a cluster counts), and an ordinal range that overlaps an earlier one loses its
// range (the share is kept and gets a new one). Each entry is looked up by binary search: there
// are far fewer shares than clusters.
func (s *scheduler) joinPrevious() {
	s.ws.known, s.ws.withRange = s.ws.known[:0], s.ws.withRange[:0]
	if s.in.Previous == nil || len(s.in.Previous.Shares) == 0 {
		return
	}
	shares := s.in.Previous.Shares
	s.ws.known = grow(s.ws.known, len(shares))
	withRange := s.ws.withRange[:0]
	for k := range shares {
		sh := &shares[k]
		i, found := s.find(sh.Cluster)
		s.ws.known[k] = found
		if !found || s.nodes[i].joined {
			continue
		}
		n := &s.nodes[i]
		n.joined = true
		if sh.Replicas <= 0 {
			continue
		}
		n.prev = sh.Replicas
		s.judge(n, s.cluster(int32(i))) // a cluster that may only hold keeps its share
		if r := sh.Ordinals; r.Start >= 0 && r.Count > 0 && int64(r.Start)+int64(r.Count) <= maxOrdinal {
			n.prevRange, n.hasRange = r, true
			withRange = append(withRange, int32(i))
		}
	}
	s.ws.withRange = withRange
	s.dropOverlappingRanges(withRange)
}

// find is the node of the named cluster, by binary search.
func (s *scheduler) find(name string) (int, bool) {
	nodes, clusters := s.nodes, s.in.Clusters
	lo, hi := 0, len(nodes)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if clusters[nodes[m].cluster].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(nodes) && clusters[nodes[lo].cluster].Name == name
}

// attempt places the replicas within one affinity term, leaving shares and reasons on the nodes.
func (s *scheduler) attempt(t *term) *UnschedulableError {
	// Scratch slices are sized up front, so appends stay within the workspace's arrays.
	s.ws.cands = grow(s.ws.cands, len(s.nodes))
	cands := s.ws.cands[:0]
	// Locals, which the loop need not reload after each store to a node.
	nodes, clusters, aff, weightOf := s.nodes, s.in.Clusters, t.aff, s.weightOf
	for i := range nodes {
		n := &nodes[i]
		n.share, n.why = 0, whyNone
		c := &clusters[n.cluster]
		if m := aff.match(c); m != matched {
			n.exclude(s.termWhy(t, m))
			continue
		}
		if why := s.spread.missingField(c); why != whyNone {
			n.exclude(why)
			continue
		}
		if n.health.elig == ineligible {
			n.exclude(n.health.why)
			continue
		}
		if weightOf != nil && weightOf[i] < 0 { // once per decision, while the labels are in cache
			weightOf[i] = s.staticWeight(c)
		}
		cands = append(cands, int32(i))
	}
	if len(cands) == 0 {
		return s.unschedulable(t, 0, "")
	}
	chosen := cands
	if s.spread.selects {
		need := int64(-1)
		if s.strat.capacityBound() {
			need = int64(s.in.Replicas)
		}
		var problem string
		chosen, problem = s.selectBySpread(cands, need)
		if problem != "" {
			return s.unschedulable(t, len(cands), problem)
		}
		s.markUnchosen(cands, chosen)
	}
	if problem := s.divide(chosen); problem != "" {
		return s.unschedulable(t, len(cands), problem)
	}
	return nil
}

// markUnchosen gives the reason to candidates the spread constraints left out. Both lists are in
// name order.
func (s *scheduler) markUnchosen(cands, chosen []int32) {
	j := 0
	for _, n := range cands {
		if j < len(chosen) && chosen[j] == n {
			j++
			continue
		}
		s.nodes[n].exclude(whyNotSelected)
	}
}

func (s *scheduler) unschedulable(t *term, fit int, problem string) *UnschedulableError {
	e := &UnschedulableError{AffinityName: t.name, Clusters: len(s.nodes), Fit: fit, Problem: problem}
	for i := range s.nodes {
		if why := s.nodes[i].why; why != whyNone && why != whyNotSelected {
			e.Excluded = append(e.Excluded, Exclusion{Cluster: s.cluster(int32(i)).Name, Reason: s.why(why).reason, Message: s.why(why).message})
		}
	}
	return e
}

// decision assembles the result from the nodes: shares with ordinals, the primary and the
// exclusions, all in name order. It fails only when no free ordinals are left for a new share.
func (s *scheduler) decision(affinityName string) (Decision, error) {
	d := Decision{AffinityName: affinityName}
	holders := s.holders
	d.Shares = make([]Share, 0, holders)
	d.Excluded = make([]Exclusion, len(s.nodes)-holders)
	s.ws.owners = grow(s.ws.owners, holders)
	owners := s.ws.owners[:0] // owners[k] is the node of d.Shares[k]
	// Locals, which the loop need not reload after each store into the result.
	nodes, clusters, whys, excluded := s.nodes, s.in.Clusters, s.ws.whys, d.Excluded
	k := 0
	for i := range nodes {
		n := &nodes[i]
		name := clusters[n.cluster].Name
		if n.share > 0 {
			d.Shares = append(d.Shares, Share{Cluster: name, Replicas: n.share})
			owners = append(owners, int32(i))
			continue
		}
		if n.why == whyNone {
			n.why = whyRoundedToZero
		}
		why := &whys[n.why]
		// Field by field: assigning a whole struct with pointers costs a bulk write barrier while
		// the garbage collector runs, which dominated large fleets.
		e := &excluded[k]
		e.Cluster, e.Reason, e.Message = name, why.reason, why.message
		k++
	}
	if err := s.assignOrdinals(d.Shares, owners); err != nil {
		return Decision{}, err
	}
	d.Primary = s.choosePrimary(d.Shares, owners)
	return d, nil
}
