package placement

import (
	"slices"
	"strings"
)

// choosePrimary picks the cluster whose share holds the primary. shares are in name order and
// owners[k] is the node of shares[k]. A cluster is healthy when it is Ready and no NoExecute
// toleration is counting down on it. In order:
//  1. on a requested switchover, the first preferred cluster that holds a replica and is healthy;
//  2. the current primary, while its cluster holds a replica and is healthy;
//  3. the first preferred cluster that holds a replica and is healthy;
//  4. the healthy cluster with the most replicas, ties by name;
//  5. when no holder is healthy, the same choices without the health condition, so the primary
//     moves only when there is somewhere better to go.
func (s *scheduler) choosePrimary(shares []Share, owners []int32) string {
	if len(shares) == 0 {
		return ""
	}
	healthy := func(k int) bool {
		n := &s.nodes[owners[k]]
		return s.in.Clusters[n.cluster].Ready && !n.health.evicting
	}
	find := func(name string) int {
		k, ok := slices.BinarySearchFunc(shares, name, func(sh Share, name string) int { return strings.Compare(sh.Cluster, name) })
		if !ok || name == "" {
			return -1
		}
		return k
	}
	preferred := func(needHealthy bool) int {
		for _, name := range s.in.PreferredPrimaries {
			if k := find(name); k >= 0 && (!needHealthy || healthy(k)) {
				return k
			}
		}
		return -1
	}
	most := func(needHealthy bool) int {
		best := -1
		for k := range shares { // name order, so a strict comparison keeps the first name on ties
			if (!needHealthy || healthy(k)) && (best < 0 || shares[k].Replicas > shares[best].Replicas) {
				best = k
			}
		}
		return best
	}
	current := -1
	if s.in.Previous != nil {
		current = find(s.in.Previous.Primary)
	}

	if s.in.Switchover {
		if k := preferred(true); k >= 0 {
			return shares[k].Cluster
		}
	}
	for _, needHealthy := range []bool{true, false} {
		if current >= 0 && (!needHealthy || healthy(current)) {
			return shares[current].Cluster
		}
		if k := preferred(needHealthy); k >= 0 {
			return shares[k].Cluster
		}
		if k := most(needHealthy); k >= 0 {
			return shares[k].Cluster
		}
	}
	return shares[0].Cluster // unreachable: most(false) always finds a share
}
