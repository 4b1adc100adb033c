package placement

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Schedule decides which clusters run how many replicas of one DatabaseCluster. It is a pure
// function of in: the same input, in any order, gives the same decision. It returns an
// *UnschedulableError when the placement cannot be met, and an error wrapping ErrInvalidPlacement
// for input it cannot interpret.
func Schedule(in Input) (Decision, error) {
	if in.Replicas < 0 {
		return Decision{}, fmt.Errorf("%w: replicas %d is negative", ErrInvalidPlacement, in.Replicas)
	}
	placement, err := compile(&in.Placement)
	if err != nil {
		return Decision{}, err
	}
	s := &scheduler{in: &in, compiled: placement, ws: workspaces.Get().(*workspace)}
	defer s.ws.release()
	if err := s.buildNodes(); err != nil {
		return Decision{}, err
	}
	if in.Replicas == 0 {
		for i := range s.nodes {
			s.nodes[i].exclude(explNoReplicas)
		}
		return s.decision(""), nil
	}
	var first, last *UnschedulableError
	for i := range s.terms {
		failure := s.attempt(&s.terms[i])
		if failure == nil {
			return s.decision(s.terms[i].name), nil
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
	in *Input
	*compiled
	// nodes are the input clusters in name order; every index below refers to this slice.
	nodes []node
	ws    *workspace
	texts taintTexts
	// groupOf[t][node] is the node's group id for topology constraint t; see groupIDs.
	groupOf    [][]int32
	groupCount []int
	// steadyKept is set when Steady division kept or shrank the previous shares, so clusters
	// without one got nothing by design.
	steadyKept bool
}

// node is one cluster and what this decision derived about it. It is kept small: a decision over
// thousands of clusters walks these many times.
type node struct {
	c         *Cluster
	prevRange v1alpha1.OrdinalRange
	prev      int32 // previous share, 0 if none
	// share is the result of the current attempt; why explains a cluster left without one.
	share int32
	// free is how many replicas the cluster may gain: 0 when it may only hold, spec.replicas when
	// capacity does not limit it (Karmada's rule for unbounded estimates).
	free   int64
	why    *explanation
	health verdict
	// hasRange says prevRange is usable: positive count, no overlap with another previous range.
	hasRange bool
}

// capacity is how many replicas of this database the cluster could hold in all (Karmada's
// AvailableReplicas: assigned plus allocatable).
func (n *node) capacity() int64 { return int64(n.prev) + n.free }

func (n *node) exclude(why *explanation) {
	n.share = 0
	n.why = why
}

// buildNodes orders the clusters by name, rejects duplicates, joins the previous decision and
// judges each cluster's health once for all affinity terms.
func (s *scheduler) buildNodes() error {
	in := s.in
	order := nameOrder(in.Clusters, s.ws)
	s.ws.nodes = grow(s.ws.nodes, len(order))
	s.nodes = s.ws.nodes
	for i, o := range order {
		// Field by field: assigning a whole struct with pointers costs a bulk write barrier while
		// the garbage collector runs, which dominated large fleets.
		n := &s.nodes[i]
		n.c, n.why, n.health.why = &in.Clusters[o], nil, nil
		n.prev, n.share, n.free, n.hasRange = 0, 0, 0, false
		if i > 0 && s.nodes[i-1].c.Name == s.nodes[i].c.Name {
			return fmt.Errorf("%w: cluster %q appears more than once", ErrInvalidPlacement, s.nodes[i].c.Name)
		}
	}
	s.joinPrevious()
	for i := range s.nodes {
		n := &s.nodes[i]
		n.health = judgeHealth(n.c, n.prev > 0, s.tolerations, in.Now, &s.texts)
		switch {
		case n.health.elig != eligible:
			n.free = 0
		case n.c.Unlimited:
			n.free = int64(in.Replicas)
		default:
			n.free = int64(max(n.c.AvailableReplicas, 0))
		}
	}
	return nil
}

// joinPrevious copies the previous shares onto the nodes. Previous comes from status, which the
// engine does not trust: unknown clusters, non-positive shares and duplicates are ignored, and an
// ordinal range that overlaps an earlier one loses its range (the share is kept and gets a new one).
func (s *scheduler) joinPrevious() {
	if s.in.Previous == nil || len(s.in.Previous.Shares) == 0 {
		return
	}
	prev := slices.Clone(s.in.Previous.Shares)
	slices.SortStableFunc(prev, func(a, b Share) int { return strings.Compare(a.Cluster, b.Cluster) })
	j := 0
	for i := range s.nodes {
		name := s.nodes[i].c.Name
		for j < len(prev) && prev[j].Cluster < name {
			j++
		}
		if j < len(prev) && prev[j].Cluster == name && prev[j].Replicas > 0 {
			n := &s.nodes[i]
			n.prev = prev[j].Replicas
			if r := prev[j].Ordinals; r.Start >= 0 && r.Count > 0 && int64(r.Start)+int64(r.Count) <= maxOrdinal {
				n.prevRange, n.hasRange = r, true
			}
			j++ // a duplicate entry for the same cluster is skipped by the next comparison
		}
	}
	s.dropOverlappingRanges()
}

// attempt places the replicas within one affinity term, leaving shares and reasons on the nodes.
func (s *scheduler) attempt(t *term) *UnschedulableError {
	cands := grow(s.ws.cands, len(s.nodes))[:0]
	defer func() { s.ws.cands = cands }()
	for i := range s.nodes {
		n := &s.nodes[i]
		n.share, n.why = 0, nil
		if why := t.aff.match(n.c); why != nil {
			n.exclude(why)
			continue
		}
		if why := s.spread.missingField(n.c); why != nil {
			n.exclude(why)
			continue
		}
		if n.health.elig == ineligible {
			n.exclude(n.health.why)
			continue
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
		s.nodes[n].exclude(explNotSelected)
	}
}

func (s *scheduler) unschedulable(t *term, fit int, problem string) *UnschedulableError {
	e := &UnschedulableError{AffinityName: t.name, Clusters: len(s.nodes), Fit: fit, Problem: problem}
	for i := range s.nodes {
		n := &s.nodes[i]
		if n.why != nil && n.why != explNotSelected {
			e.Excluded = append(e.Excluded, Exclusion{Cluster: n.c.Name, Reason: n.why.reason, Message: n.why.message})
		}
	}
	return e
}

// decision assembles the result from the nodes: shares with ordinals, the primary and the
// exclusions, all in name order.
func (s *scheduler) decision(affinityName string) Decision {
	d := Decision{AffinityName: affinityName}
	holders := 0
	for i := range s.nodes {
		if s.nodes[i].share > 0 {
			holders++
		}
	}
	d.Shares = make([]Share, 0, holders)
	d.Excluded = make([]Exclusion, len(s.nodes)-holders)
	owners := make([]int32, 0, holders) // owners[k] is the node of d.Shares[k]
	k := 0
	for i := range s.nodes {
		n := &s.nodes[i]
		if n.share > 0 {
			d.Shares = append(d.Shares, Share{Cluster: n.c.Name, Replicas: n.share})
			owners = append(owners, int32(i))
			continue
		}
		if n.why == nil {
			n.why = explRoundedToZero
		}
		e := &d.Excluded[k] // field by field, see buildNodes
		e.Cluster, e.Reason, e.Message = n.c.Name, n.why.reason, n.why.message
		k++
	}
	s.assignOrdinals(d.Shares, owners)
	d.Primary = s.choosePrimary(d.Shares, owners)
	return d
}
