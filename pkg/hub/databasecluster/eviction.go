package databasecluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
)

// Graceful eviction: a share that leaves the placement while its cluster still exists is kept
// (as replicas at the current epoch, labelled dbfleet.io/evicting) until its replacements are
// Ready, its grace period ends, or, with purgeMode Never, a person deletes its MemberDatabase.
// status.evictions lists such shares; their clusters get no new share of the database meanwhile,
// and their ordinals are not reused.

// purgePolicy is how one kind of eviction is purged.
type purgePolicy struct {
	mode  dbfleetv1alpha1.PurgeMode
	grace time.Duration
}

// purgePolicyFor reads the policy's failover settings for an eviction of the given reason.
// Planned migrations are always graceful, with the default grace period.
func purgePolicyFor(reason dbfleetv1alpha1.EvictionReason, f *dbfleetv1alpha1.FailoverBehavior) purgePolicy {
	p := purgePolicy{mode: dbfleetv1alpha1.PurgeGracefully, grace: dbfleetv1alpha1.DefaultGracePeriodSeconds * time.Second}
	set := func(mode dbfleetv1alpha1.PurgeMode, grace *int32) {
		if mode != "" {
			p.mode = mode
		}
		if grace != nil {
			p.grace = time.Duration(*grace) * time.Second
		}
	}
	switch {
	case f == nil:
	case reason == dbfleetv1alpha1.EvictionClusterFailure && f.Cluster != nil:
		set(f.Cluster.PurgeMode, f.Cluster.GracePeriodSeconds)
	case reason == dbfleetv1alpha1.EvictionApplicationFailure && f.Application != nil:
		set(f.Application.PurgeMode, f.Application.GracePeriodSeconds)
	}
	return p
}

// evict records the shares an adopted decision took off clusters that still exist. A share whose
// purge mode is Immediately is only listed in out.Purged (propagate deletes it at once).
func evict(dbc *dbfleetv1alpha1.DatabaseCluster, previous []dbfleetv1alpha1.ClusterPlacement,
	members map[string]*dbfleetv1alpha1.MemberCluster, avoid map[string]dbfleetv1alpha1.EvictionReason,
	failover *dbfleetv1alpha1.FailoverBehavior, now time.Time, out *Outcome) {
	for _, p := range previous {
		if placedOn(dbc, p.Cluster) {
			continue
		}
		mc := members[p.Cluster]
		if mc == nil || !mc.DeletionTimestamp.IsZero() {
			out.Purged = append(out.Purged, p.Cluster) // the cluster is leaving the fleet
			continue
		}
		reason := evictionReason(mc, avoid)
		purge := purgePolicyFor(reason, failover)
		evictions.WithLabelValues(string(reason)).Inc()
		if reason != dbfleetv1alpha1.EvictionMigration {
			out.FailureEvictions++
		}
		if purge.mode == dbfleetv1alpha1.PurgeImmediately {
			out.Purged = append(out.Purged, p.Cluster)
			continue
		}
		e := dbfleetv1alpha1.Eviction{
			Cluster: p.Cluster, Replicas: p.Replicas, Ordinals: p.Ordinals, ReadyReplicas: p.ReadyReplicas,
			Reason: reason, PurgeMode: purge.mode, Since: metav1.NewTime(now),
		}
		if purge.mode == dbfleetv1alpha1.PurgeGracefully {
			after := metav1.NewTime(now.Add(purge.grace))
			e.PurgeAfter = &after
		}
		dbc.Status.Evictions = append(dbc.Status.Evictions, e)
		out.Evicted = append(out.Evicted, e)
	}
	slices.SortFunc(dbc.Status.Evictions, func(a, b dbfleetv1alpha1.Eviction) int { return strings.Compare(a.Cluster, b.Cluster) })
}

// evictionReason says why a share left a cluster that still exists.
func evictionReason(mc *dbfleetv1alpha1.MemberCluster, avoid map[string]dbfleetv1alpha1.EvictionReason) dbfleetv1alpha1.EvictionReason {
	if avoid[mc.Name] == dbfleetv1alpha1.EvictionApplicationFailure {
		return dbfleetv1alpha1.EvictionApplicationFailure
	}
	if !clusterReady(mc) {
		return dbfleetv1alpha1.EvictionClusterFailure
	}
	for _, t := range mc.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			return dbfleetv1alpha1.EvictionClusterFailure
		}
	}
	return dbfleetv1alpha1.EvictionMigration
}

// evictedOrdinals are the ordinal ranges of kept shares, which new shares must not reuse.
func evictedOrdinals(dbc *dbfleetv1alpha1.DatabaseCluster) []dbfleetv1alpha1.OrdinalRange {
	if len(dbc.Status.Evictions) == 0 {
		return nil
	}
	out := make([]dbfleetv1alpha1.OrdinalRange, len(dbc.Status.Evictions))
	for i, e := range dbc.Status.Evictions {
		out[i] = e.Ordinals
	}
	return out
}

// Reasons a cluster the hub avoids for one database is excluded from its placement.
const (
	ReasonEvictedShareKept  = "evicted share still kept"
	ReasonApplicationFailed = "share failed (application failover)"
)

// withAvoided adds the avoided clusters to a decision's exclusions, keeping them sorted.
func withAvoided(excluded []placement.Exclusion, avoid map[string]dbfleetv1alpha1.EvictionReason) []placement.Exclusion {
	if len(avoid) == 0 {
		return excluded
	}
	for cluster, reason := range avoid {
		e := placement.Exclusion{Cluster: cluster, Reason: ReasonEvictedShareKept,
			Message: "its evicted share is kept until it may be purged"}
		if reason == dbfleetv1alpha1.EvictionApplicationFailure {
			e.Reason, e.Message = ReasonApplicationFailed, "its share stayed unavailable past failover.application.decisionConditions.tolerationSeconds"
		}
		excluded = append(excluded, e)
	}
	slices.SortFunc(excluded, func(a, b placement.Exclusion) int { return strings.Compare(a.Cluster, b.Cluster) })
	return excluded
}

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
		if !clusterReady(mc) || mdb == nil || mdb.Status.ObservedGeneration == 0 {
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
			reachable: clusterReady(mc)})
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
