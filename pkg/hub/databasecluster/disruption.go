package databasecluster

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// DefaultUnhealthyClusterThreshold is the share of member clusters that, not Ready at once (and
// at least minUnhealthyClusters of them), pauses every eviction for failure: kube-controller-
// manager's --unhealthy-zone-threshold for nodes, the same 0.55.
const DefaultUnhealthyClusterThreshold = 0.55

// minUnhealthyClusters is how many clusters must be not Ready for the threshold to apply, short
// of all of them (kube-controller-manager's minimum is 3 nodes): one cluster of three lost, or
// two, is a failure to fail over from.
const minUnhealthyClusters = 3

// disruptionRecheck is when a database whose evictions are paused is looked at again, should no
// MemberCluster change wake it first.
const disruptionRecheck = 10 * time.Second

// disruption says why evictions for failure are paused now, "" when they are not. When every
// member cluster (two or more) is not Ready, or at least minUnhealthyClusters and threshold of
// them are, the likelier fault is on the hub's side of every link (its API server, its network,
// every agent stopped by one bad upgrade) rather than in the clusters, whose databases go on
// meanwhile (a primary that hears its standbys keeps taking writes: docs/failover.md). Moving
// shares then would only take standbys away from running primaries, and cannot reach a cluster
// that is sure to be healthy: the hub keeps the placement in force until enough clusters are
// Ready again.
func disruption(members map[string]*dbfleetv1alpha1.MemberCluster, threshold float64) string {
	if len(members) < 2 {
		return ""
	}
	var notReady []string
	for name, mc := range members {
		if !scheduling.ClusterReady(mc) {
			notReady = append(notReady, name)
		}
	}
	all := len(notReady) == len(members)
	share := float64(len(notReady)) / float64(len(members))
	if !all && (len(notReady) < minUnhealthyClusters || share < threshold) {
		return ""
	}
	slices.Sort(notReady)
	return fmt.Sprintf("%d of %d member clusters are not Ready (%s): at or above the unhealthy-cluster threshold (%.0f%%, --unhealthy-cluster-threshold), evictions for failure are paused until enough of them are Ready again",
		len(notReady), len(members), shortList(notReady, 5), threshold*100)
}

// shortList names up to n items, then how many more.
func shortList(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// disruptionMemory remembers whether this hub process is in a disruption, hub-wide, and when
// the last one ended: the clusters come back one by one (their agents restart, their links
// return), and the first back must not draw at once the shares of those a moment behind, whose
// tolerations ran out long ago (seen in the end-to-end suite: every agent stopped for 2 minutes;
// the first agent back, its cluster Ready, took the other two clusters' standbys). So evictions
// for failure stay paused for settle after the end: a cluster still down then has been silent
// for a whole grace period of its own since. (kube-controller-manager likewise gives nodes a
// fresh grace period when their zone leaves full disruption.) A restarted hub remembers nothing,
// and judges the clusters as they are.
type disruptionMemory struct {
	mu        sync.Mutex
	disrupted bool
	endedAt   time.Time
}

// note records what disruption said at now and returns why evictions for failure are paused:
// the disruption itself, or how long it is since it ended (with when to look again); "" when
// they are not.
func (d *disruptionMemory) note(why string, now time.Time, settle time.Duration) (string, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if why != "" {
		d.disrupted = true
		return why, disruptionRecheck
	}
	if d.disrupted {
		d.disrupted, d.endedAt = false, now
	}
	if d.endedAt.IsZero() {
		return "", 0
	}
	if left := d.endedAt.Add(settle).Sub(now); left > 0 {
		return fmt.Sprintf("too many member clusters were not Ready at once until %s ago: evictions for failure stay paused for %s after that (the cluster grace period), so that clusters coming back a moment apart do not take each other's shares",
			now.Sub(d.endedAt).Round(time.Second), settle), left
	}
	return "", 0
}
