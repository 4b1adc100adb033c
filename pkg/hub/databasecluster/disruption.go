package databasecluster

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// DefaultUnhealthyClusterThreshold is the share of a database's clusters that, not Ready at once
// (and at least minUnhealthyClusters of them), pauses its evictions for failure:
// kube-controller-manager's --unhealthy-zone-threshold for nodes, the same 0.55.
const DefaultUnhealthyClusterThreshold = 0.55

// minUnhealthyClusters is how many of its clusters must be not Ready for the threshold to apply,
// short of all of them (kube-controller-manager's minimum is 3 nodes): one cluster of three lost,
// or two, is a failure to fail over from.
const minUnhealthyClusters = 3

// disruptionRecheck is when a database whose evictions are paused is looked at again, should no
// MemberCluster change wake it first.
const disruptionRecheck = 10 * time.Second

// disruption says why the evictions for failure of a database placed on the clusters placed are
// paused now, "" when they are not. When every one of them (two or more) is not Ready, or at
// least minUnhealthyClusters and threshold of them are, the likelier fault is on the hub's side
// of every link (its API server, its network, every agent stopped by one bad upgrade) rather than
// in the clusters, whose databases go on meanwhile (a primary that hears its standbys keeps
// taking writes: docs/failover.md). Moving shares then would only take standbys away from a
// running primary (into its own cluster, the end-to-end suite saw), and no standby could be
// promoted where none runs: the hub keeps the placement in force until enough of them are Ready
// again. Only the database's own clusters count: a fleet's stale MemberClusters of clusters long
// gone must not pause every failover.
func disruption(members map[string]*dbfleetv1alpha1.MemberCluster, placed []string, threshold float64) string {
	if len(placed) < 2 {
		return ""
	}
	var notReady []string
	for _, name := range placed {
		if !scheduling.ClusterReady(members[name]) {
			notReady = append(notReady, name)
		}
	}
	all := len(notReady) == len(placed)
	share := float64(len(notReady)) / float64(len(placed))
	if !all && (len(notReady) < minUnhealthyClusters || share < threshold) {
		return ""
	}
	slices.Sort(notReady)
	return fmt.Sprintf("%d of the %d clusters the database is placed on are not Ready (%s): at or above the unhealthy-cluster threshold (%.0f%%, --unhealthy-cluster-threshold), its evictions for failure are paused until enough of them are Ready again",
		len(notReady), len(placed), shortList(notReady, 5), threshold*100)
}

// placedClusters are the clusters of the database's placement in force.
func placedClusters(dbc *dbfleetv1alpha1.DatabaseCluster) []string {
	out := make([]string, 0, len(dbc.Status.Placements))
	for _, p := range dbc.Status.Placements {
		out = append(out, p.Cluster)
	}
	return out
}

// shortList names up to n items, then how many more.
func shortList(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// disruptionMemory remembers, per database, whether it is in a disruption and when its last one
// ended: the clusters come back one by one (their agents restart, their links return), and the
// first back must not draw at once the shares of those a moment behind, whose tolerations ran out
// long ago (seen in the end-to-end suite: every agent stopped for 2 minutes; the first agent
// back, its cluster Ready, took the other two clusters' standbys). So evictions for failure stay
// paused for settle after the end: a cluster still down then has been silent for a whole grace
// period of its own since. (kube-controller-manager likewise gives nodes a fresh grace period
// when their zone leaves full disruption.) A restarted hub remembers nothing, and judges the
// clusters as they are.
type disruptionMemory struct {
	mu    sync.Mutex
	state map[types.NamespacedName]*disruptionState
}

type disruptionState struct {
	disrupted bool
	endedAt   time.Time
}

// note records what disruption said of db at now and returns why its evictions for failure are
// paused: the disruption itself, or how long it is since it ended (with when to look again); ""
// when they are not.
func (d *disruptionMemory) note(db types.NamespacedName, why string, now time.Time, settle time.Duration) (string, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state[db]
	if why != "" {
		if st == nil {
			if d.state == nil {
				d.state = map[types.NamespacedName]*disruptionState{}
			}
			st = &disruptionState{}
			d.state[db] = st
		}
		st.disrupted = true
		return why, disruptionRecheck
	}
	if st == nil {
		return "", 0
	}
	if st.disrupted {
		st.disrupted, st.endedAt = false, now
	}
	if left := st.endedAt.Add(settle).Sub(now); left > 0 {
		return fmt.Sprintf("too many of the database's clusters were not Ready at once until %s ago: its evictions for failure stay paused for %s after that (the cluster grace period), so that clusters coming back a moment apart do not take each other's shares",
			now.Sub(st.endedAt).Round(time.Second), settle), left
	}
	delete(d.state, db) // over: nothing to remember
	return "", 0
}
