package scheduling

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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
		if PlacedOn(dbc, p.Cluster) {
			continue
		}
		mc := members[p.Cluster]
		if mc == nil || !mc.DeletionTimestamp.IsZero() {
			out.Purged = append(out.Purged, p.Cluster) // the cluster is leaving the fleet
			continue
		}
		reason := evictionReason(mc, avoid)
		purge := purgePolicyFor(reason, failover)
		if out.Evictions == nil {
			out.Evictions = map[dbfleetv1alpha1.EvictionReason]int{}
		}
		out.Evictions[reason]++
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
	if !ClusterReady(mc) {
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
