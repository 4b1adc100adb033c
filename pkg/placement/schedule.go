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
	s := &scheduler{in: &in, compiled: placement}
	if err := s.buildNodes(); err != nil {
		return Decision{}, err
	}
	if in.Replicas == 0 {
		for i := range s.nodes {
			s.nodes[i].exclude(ReasonNoReplicas, "spec.replicas is 0")
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
	texts taintTexts
	// steadyKept is set when Steady division kept or shrank the previous shares, so clusters
	// without one got nothing by design.
	steadyKept bool
}

// node is one cluster and what this decision derived about it.
type node struct {
	c         *Cluster
	prev      int32 // previous share, 0 if none
	prevRange v1alpha1.OrdinalRange
	hasRange  bool // prevRange is usable: positive count, no overlap with another previous range
	health    verdict
	// free is how many replicas the cluster may gain: 0 when it may only hold, spec.replicas when
	// capacity does not limit it (Karmada's rule for unbounded estimates).
	free int64
	// Results of the current attempt.
	share           int32
	reason, message string
}

// capacity is how many replicas of this database the cluster could hold in all (Karmada's
// AvailableReplicas: assigned plus allocatable).
func (n *node) capacity() int64 { return int64(n.prev) + n.free }

func (n *node) exclude(reason, message string) {
	n.share = 0
	n.reason, n.message = reason, message
}

// buildNodes orders the clusters by name, rejects duplicates, joins the previous decision and
// judges each cluster's health once for all affinity terms.
func (s *scheduler) buildNodes() error {
	in := s.in
	order := make([]int32, len(in.Clusters))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(in.Clusters[a].Name, in.Clusters[b].Name) })
	s.nodes = make([]node, len(order))
	for i, o := range order {
		s.nodes[i].c = &in.Clusters[o]
		if i > 0 && s.nodes[i-1].c.Name == s.nodes[i].c.Name {
			return fmt.Errorf("%w: cluster %q appears more than once", ErrInvalidPlacement, s.nodes[i].c.Name)
		}
	}
	s.joinPrevious()
	for i := range s.nodes {
		n := &s.nodes[i]
		n.health = judgeHealth(n.c, n.prev > 0, in.Placement.ClusterTolerations, in.Now, &s.texts)
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
	cands := make([]int32, 0, len(s.nodes))
	for i := range s.nodes {
		n := &s.nodes[i]
		n.share, n.reason, n.message = 0, "", ""
		if ok, why := t.aff.match(n.c); !ok {
			n.exclude(ReasonClusterAffinity, why)
			continue
		}
		if reason := s.spread.missingField(n.c); reason != "" {
			n.exclude(reason, "a spread constraint groups clusters by this field and the cluster leaves it empty")
			continue
		}
		if n.health.elig == ineligible {
			n.exclude(n.health.reason, n.health.message)
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
		s.nodes[n].exclude(ReasonNotSelected, "spreadConstraints chose other clusters")
	}
}

func (s *scheduler) unschedulable(t *term, fit int, problem string) *UnschedulableError {
	e := &UnschedulableError{AffinityName: t.name, Clusters: len(s.nodes), Fit: fit, Problem: problem}
	for i := range s.nodes {
		n := &s.nodes[i]
		if n.reason != "" && n.reason != ReasonNotSelected {
			e.Excluded = append(e.Excluded, Exclusion{Cluster: n.c.Name, Reason: n.reason, Message: n.message})
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
	d.Excluded = make([]Exclusion, 0, len(s.nodes)-holders)
	owners := make([]int32, 0, holders) // owners[k] is the node of d.Shares[k]
	for i := range s.nodes {
		n := &s.nodes[i]
		if n.share > 0 {
			d.Shares = append(d.Shares, Share{Cluster: n.c.Name, Replicas: n.share})
			owners = append(owners, int32(i))
			continue
		}
		if n.reason == "" {
			n.reason, n.message = ReasonRoundedToZero, "the divisor method gave its weight no replica"
		}
		d.Excluded = append(d.Excluded, Exclusion{Cluster: n.c.Name, Reason: n.reason, Message: n.message})
	}
	s.assignOrdinals(d.Shares, owners)
	d.Primary = s.choosePrimary(d.Shares, owners)
	return d
}
