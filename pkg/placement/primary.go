package placement

import (
	"slices"
	"strings"
)

// choosePrimary picks the cluster whose share holds the primary. shares are in name order and
// owners[k] is the node of shares[k]. A cluster is healthy when it is Ready, no NoExecute
// toleration is counting down on it, and it is not in Input.NoPrimary. In order:
//  1. on a switchover to one of Input.SwitchoverTo while the current primary is healthy, the best
//     of them (as in 3) that holds a replica and is healthy, or else the current primary;
//     on a requested switchover (Input.Switchover), the first preferred cluster that holds a
//     replica and is healthy;
//  2. the current primary, while its cluster holds a replica and is healthy;
//  3. among the healthy clusters holding a replica, the one whose share has come furthest in the
//     WAL (Input.Progress: the least data lost); on equal progress the first preferred one, then
//     the one with the most replicas, then by name;
//  4. when no holder is healthy, the same choices without the health condition, so the primary
//     moves only when there is somewhere better to go.
func (s *scheduler) choosePrimary(shares []Share, owners []int32) string {
	if len(shares) == 0 {
		return ""
	}
	healthy := func(k int) bool {
		n := &s.nodes[owners[k]]
		return s.in.Clusters[n.cluster].Ready && !n.health.evicting && !slices.Contains(s.in.NoPrimary, shares[k].Cluster)
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
	rank := func(name string) int {
		if i := slices.Index(s.in.PreferredPrimaries, name); i >= 0 {
			return i
		}
		return len(s.in.PreferredPrimaries)
	}
	// better says whether share a beats share b as the new primary.
	better := func(a, b int) bool {
		if c := s.in.Progress[shares[a].Cluster].Compare(s.in.Progress[shares[b].Cluster]); c != 0 {
			return c > 0
		}
		if ra, rb := rank(shares[a].Cluster), rank(shares[b].Cluster); ra != rb {
			return ra < rb
		}
		return shares[a].Replicas > shares[b].Replicas // name order: ties keep the first name
	}
	best := func(needHealthy bool, among func(int) bool) int {
		found := -1
		for k := range shares {
			if (!needHealthy || healthy(k)) && among(k) && (found < 0 || better(k, found)) {
				found = k
			}
		}
		return found
	}
	anyShare := func(int) bool { return true }
	current := -1
	if s.in.Previous != nil {
		current = find(s.in.Previous.Primary)
	}

	if len(s.in.SwitchoverTo) > 0 && current >= 0 && healthy(current) {
		target := func(k int) bool { return slices.Contains(s.in.SwitchoverTo, shares[k].Cluster) }
		if target(current) {
			return shares[current].Cluster
		}
		if k := best(true, target); k >= 0 {
			return shares[k].Cluster
		}
		return shares[current].Cluster
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
		if k := best(needHealthy, anyShare); k >= 0 {
			return shares[k].Cluster
		}
	}
	return shares[0].Cluster // unreachable: best(false) always finds a share
}
