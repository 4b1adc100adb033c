package databasecluster

import (
	"fmt"
	"slices"
	"strings"
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
