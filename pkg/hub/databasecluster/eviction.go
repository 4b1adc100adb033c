package databasecluster

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// Graceful eviction is decided by scheduling (which shares leave, and how they are purged); the
// reconciler finds the shares whose application failed, purges kept shares when they may go,
// and reports it.

// avoidClusters lists the clusters this database must not be placed on now: those holding a
// kept evicted share, and those where its share has been unavailable for longer than the
// policy's application failover toleration. It returns when the next share's toleration runs out.
func avoidClusters(s *scope, failover *dbfleetv1alpha1.FailoverBehavior, now time.Time) (map[string]dbfleetv1alpha1.EvictionReason, time.Duration) {
	avoid := map[string]dbfleetv1alpha1.EvictionReason{}
	for _, e := range s.dbc.Status.Evictions {
		avoid[e.Cluster] = e.Reason
	}
	if failover == nil || failover.Application == nil {
		return avoid, 0
	}
	toleration := 300 * time.Second
	if t := failover.Application.DecisionConditions.TolerationSeconds; t != nil {
		toleration = time.Duration(*t) * time.Second
	}
	var next time.Duration
	for _, p := range s.dbc.Status.Placements {
		mc, mdb := s.members[p.Cluster], s.memberDBs[p.Cluster]
		// A silent or unready cluster is cluster failover's business; a share not reported yet
		// has not failed.
		if !scheduling.ClusterReady(mc) || mdb == nil || mdb.Status.ObservedGeneration == 0 {
			continue
		}
		c := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
		if c == nil || c.Status == metav1.ConditionTrue {
			continue
		}
		// The agent stamps the condition on its own clock, in whole seconds (hence the extra
		// second: never early); a skew shifts this deadline by as much, which costs timeliness,
		// never safety (a primary moves only through the demotion or fencing protocol).
		deadline := c.LastTransitionTime.Add(toleration + time.Second)
		if !now.Before(deadline) {
			avoid[p.Cluster] = dbfleetv1alpha1.EvictionApplicationFailure
			continue
		}
		if wait := deadline.Sub(now); next == 0 || wait < next {
			next = wait
		}
	}
	return avoid, next
}

// purgeEvictions drops the evictions that may go now: replacements Ready (Gracefully), grace
// period over (Gracefully), or the MemberDatabase already gone or going (any mode). Their
// MemberDatabases are then deleted by propagate. It returns when the next grace period ends.
func (r *Reconciler) purgeEvictions(s *scope, now time.Time) time.Duration {
	dbc := s.dbc
	if len(dbc.Status.Evictions) == 0 {
		return 0
	}
	replaced := replacementsReady(s)
	var next time.Duration
	kept := dbc.Status.Evictions[:0]
	for _, e := range dbc.Status.Evictions {
		mdb := s.memberDBs[e.Cluster]
		why := ""
		switch {
		case mdb == nil || !mdb.DeletionTimestamp.IsZero():
			why = "its MemberDatabase was removed"
		case e.PurgeMode == dbfleetv1alpha1.PurgeGracefully && replaced:
			why = "every replacement replica is ready"
		case e.PurgeMode == dbfleetv1alpha1.PurgeGracefully && e.PurgeAfter != nil && !now.Before(e.PurgeAfter.Time):
			why = "its grace period ended"
		}
		if why == "" {
			if e.PurgeMode == dbfleetv1alpha1.PurgeGracefully && e.PurgeAfter != nil {
				if wait := e.PurgeAfter.Sub(now); next == 0 || wait < next {
					next = wait
				}
			}
			kept = append(kept, e)
			continue
		}
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "EvictedSharePurged", "Purge",
			"removing the %s share evicted from %s (%d replicas): %s", e.Reason, e.Cluster, e.Replicas, why)
	}
	dbc.Status.Evictions = kept
	if len(kept) == 0 {
		dbc.Status.Evictions = nil
	}
	return next
}

// replacementsReady says whether every replica now placed is ready at the current generation.
func replacementsReady(s *scope) bool {
	for _, p := range s.dbc.Status.Placements {
		mc := s.members[p.Cluster]
		state, _ := shareState(shareView{placement: p, mdb: s.memberDBs[p.Cluster],
			reachable: scheduling.ClusterReady(mc)})
		if state != dbfleetv1alpha1.PlacementAvailable {
			return false
		}
	}
	return true
}

// evictionSummary is a short account of the shares being evicted, for Events.
func evictionSummary(es []dbfleetv1alpha1.Eviction) string {
	parts := make([]string, len(es))
	for i, e := range es {
		mode := string(e.PurgeMode)
		if e.PurgeAfter != nil {
			mode += " until " + e.PurgeAfter.UTC().Format(time.RFC3339)
		}
		parts[i] = fmt.Sprintf("%s (%d replicas, %s, kept %s)", e.Cluster, e.Replicas, e.Reason, mode)
	}
	return listSome(parts)
}
