package scheduling

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/pkg/policy"
)

// Outcome is what scheduling decided for one DatabaseCluster.
type Outcome struct {
	// Match is the winning policy; nil means NoPolicy.
	Match *policy.Match
	// Decision is the placement; nil when none was made (no policy, or Err).
	Decision *placement.Decision
	// Kept is set when a decision was made but not adopted: nothing called for a re-placement
	// (see Options.Rebalance), so the placement in force stays.
	Kept bool
	// Err is why no placement was made: a *placement.UnschedulableError or an invalid placement.
	Err error
	// Reason is the Scheduled condition's reason.
	Reason string
	// Moves describe changed shares, e.g. "east 2→3", sorted.
	Moves []string
	// Evicted are the shares the adopted decision moved off clusters that still exist and that
	// are kept until they may be purged (they are also in status.evictions).
	Evicted []dbfleetv1alpha1.Eviction
	// Purged are the clusters whose share the adopted decision removed at once.
	Purged []string
	// Evictions counts, by reason, the shares the adopted decision moved off clusters that still
	// exist, kept or purged at once. Nothing is evicted until the caller adopts the outcome (the
	// hub may hold it back), so it is for the caller to count them then.
	Evictions map[dbfleetv1alpha1.EvictionReason]int
	// PendingSwitchover, when set, says why the switchover spec.primary.preferredClusters asks
	// for cannot happen yet: the first preferred cluster holds no replica, or is not healthy.
	// status.primary.preferred then keeps its old value, so every scheduling asks again and the
	// switchover happens once it can.
	PendingSwitchover string
	// PrimaryMoved is set when the primary changed cluster; Primary then holds the new one.
	PrimaryMoved bool
	// PrimaryFrom is the cluster the primary left ("none" for a first primary).
	PrimaryFrom string
	// RequeueAfter is when a NoExecute toleration runs out and the placement may change; zero if
	// none is pending.
	RequeueAfter time.Duration
}

// FailureEvictions counts the shares moved off failed clusters or failed applications (what the
// hub's eviction rate limit bounds), kept or purged at once.
func (o *Outcome) FailureEvictions() int {
	return o.Evictions[dbfleetv1alpha1.EvictionClusterFailure] + o.Evictions[dbfleetv1alpha1.EvictionApplicationFailure]
}

// Options are the hub-wide settings and per-reconcile facts a scheduling depends on.
type Options struct {
	// DefaultTolerationSeconds is the hub's --default-unreachable-toleration; nil means the
	// engine's default.
	DefaultTolerationSeconds *int64
	// Avoid are clusters that get no share of this DatabaseCluster, with why: clusters whose
	// evicted share is still kept, and clusters where its share failed (application failover).
	Avoid map[string]dbfleetv1alpha1.EvictionReason
	// Rebalance adopts the policy's decision even when nothing calls for a re-placement (`hub
	// plan` shows it so). The dbfleet.io/rebalance annotation asks for one as well.
	Rebalance bool
	// Progress is how far each share has come in the WAL (see Progress): a primary that has to
	// move goes to the share furthest along.
	Progress map[string]placement.WALProgress
	// SwitchoverTo asks for a planned switchover of a healthy primary to one of these clusters
	// (placement.Input.SwitchoverTo): the hub's version roll hands the primary to a share that
	// already runs the new version. spec.primary and status.primary.preferred are not touched,
	// so the primary stays where the roll put it.
	SwitchoverTo []string
	// NoPrimary are clusters that keep their replicas but may not hold the primary now
	// (placement.Input.NoPrimary), with why: the hub lists those whose share reports ClockSkew.
	NoPrimary map[string]string
}

// Schedule binds the winning policy and places dbc, writing status.policy, status.placements,
// status.clusters, status.primary, status.evictions and the Scheduled condition. It is pure: the
// hub and `hub plan` both call it. When nothing can be scheduled the previous placement stays:
// losing a policy or every cluster never deletes data.
//
// A decision is adopted only when something calls for it (see replacementNeeded): the
// DatabaseCluster or its policy changed, a placed cluster is no longer fit, the primary must
// move, the placement is Duplicated, or the user asked for a rebalance. So nothing moves back
// to a cluster that returns, and changing cluster capacity never shuffles healthy replicas.
func Schedule(dbc *dbfleetv1alpha1.DatabaseCluster, pps []dbfleetv1alpha1.PropagationPolicy,
	cpps []dbfleetv1alpha1.ClusterPropagationPolicy, members map[string]*dbfleetv1alpha1.MemberCluster, now time.Time, opts Options) Outcome {
	return ScheduleMatched(dbc, policy.Select(dbc, pps, cpps), members, now, opts)
}

// ScheduleMatched is Schedule once the winning policy (nil for none) is known: the hub selects
// it with its own policy.Matcher, which keeps parsed selectors between reconciles. It reads the
// policy and the members and never changes them: the hub passes objects shared with its cache.
func ScheduleMatched(dbc *dbfleetv1alpha1.DatabaseCluster, match *policy.Match, members map[string]*dbfleetv1alpha1.MemberCluster,
	now time.Time, opts Options) Outcome {
	out := Outcome{Match: match}
	if out.Match == nil {
		dbc.Status.Policy = nil
		out.Reason = dbfleetv1alpha1.ReasonNoPolicy
		setScheduled(dbc, metav1.ConditionFalse, dbfleetv1alpha1.ReasonNoPolicy,
			"no PropagationPolicy or ClusterPropagationPolicy selects this DatabaseCluster; current placement (if any) is kept")
		return out
	}

	in := placement.Input{
		Replicas:                 dbc.Spec.Replicas,
		Placement:                out.Match.Spec.Placement,
		Clusters:                 clusterSnapshot(members, opts.Avoid, placement.Requests(&dbc.Spec.DatabaseTemplate)),
		Previous:                 placement.PreviousFromStatus(&dbc.Status),
		ReservedOrdinals:         evictedOrdinals(dbc),
		DefaultTolerationSeconds: opts.DefaultTolerationSeconds,
		Now:                      now,
		Progress:                 opts.Progress,
		SwitchoverTo:             opts.SwitchoverTo,
	}
	if len(opts.NoPrimary) > 0 {
		in.NoPrimary = slices.Sorted(maps.Keys(opts.NoPrimary))
	}
	preferred := ""
	if dbc.Spec.Primary != nil {
		in.PreferredPrimaries = dbc.Spec.Primary.PreferredClusters
		if len(in.PreferredPrimaries) > 0 {
			preferred = in.PreferredPrimaries[0]
		}
	}
	// A new first preference asks for a planned switchover (the demote-then-promote protocol of
	// the reconciler applies to it like to any planned move).
	if p := dbc.Status.Primary; p != nil && preferred != "" && p.Preferred != preferred {
		in.Switchover = true
	}
	if next, ok := placement.NextEviction(&in); ok && next.After(now) {
		out.RequeueAfter = next.Sub(now)
	}
	decision, err := placement.Schedule(in)
	if err != nil {
		dbc.Status.Policy = &out.Match.Ref
		out.Err, out.Reason = err, dbfleetv1alpha1.ReasonUnschedulable
		var unschedulable *placement.UnschedulableError
		if !errors.As(err, &unschedulable) {
			out.Reason = dbfleetv1alpha1.ReasonInvalidPlacement
		}
		setScheduled(dbc, metav1.ConditionFalse, out.Reason, err.Error()+"; current placement (if any) is kept")
		return out
	}
	decision.Excluded = withAvoided(decision.Excluded, opts.Avoid)
	if in.Switchover && decision.Primary != preferred {
		out.PendingSwitchover = switchoverBlocked(preferred, &decision, members)
	}
	out.Decision, out.Reason = &decision, dbfleetv1alpha1.ReasonScheduled
	rebalance := opts.Rebalance || dbc.Annotations[dbfleetv1alpha1.AnnotationRebalance] != dbc.Status.ObservedRebalance
	if !rebalance && !replacementNeeded(dbc, out.Match, &decision) {
		out.Kept = true
		return out
	}
	dbc.Status.Policy = &out.Match.Ref
	dbc.Status.ObservedRebalance = dbc.Annotations[dbfleetv1alpha1.AnnotationRebalance]
	previous := slices.Clone(dbc.Status.Placements)
	applyDecision(dbc, decision, now, &out)
	evict(dbc, previous, members, opts.Avoid, out.Match.Spec.Failover, now, &out)
	// The preference counts as honoured only once the primary is on it: a switchover that cannot
	// happen yet stays asked for.
	if p := dbc.Status.Primary; p != nil && (preferred == "" || p.Cluster == preferred) {
		p.Preferred = preferred
	}
	return out
}

// switchoverBlocked says why the primary cannot move to the preferred cluster.
func switchoverBlocked(preferred string, d *placement.Decision, members map[string]*dbfleetv1alpha1.MemberCluster) string {
	why := "is not healthy (not Ready, or a NoExecute taint's toleration is running out)"
	switch mc := members[preferred]; {
	case mc == nil:
		why = "is not a member cluster"
	case d.ShareOf(preferred) == 0:
		why = "holds no replica of this database"
	case !ClusterReady(mc):
		why = "is not Ready"
	}
	primary := d.Primary
	if primary == "" {
		primary = "none"
	}
	return fmt.Sprintf("the switchover to %s (spec.primary.preferredClusters[0]) waits until it can take the primary: it %s; meanwhile the primary is placed on %s",
		preferred, why, primary)
}

// replacementNeeded says whether a fresh decision must replace the placement in force. Like
// Karmada's scheduler, the hub re-places a Divided or Aggregated database only when its spec or
// its policy changed or a placed cluster became unfit, never because a cluster (re)appeared or
// its capacity moved; a Duplicated one follows the fleet, since adding a copy moves nothing.
func replacementNeeded(dbc *dbfleetv1alpha1.DatabaseCluster, match *policy.Match, d *placement.Decision) bool {
	st := &dbc.Status
	if len(st.Placements) == 0 || st.Policy == nil || *st.Policy != match.Ref {
		return true
	}
	if c := meta.FindStatusCondition(st.Conditions, dbfleetv1alpha1.ConditionScheduled); c == nil ||
		c.Status != metav1.ConditionTrue || c.ObservedGeneration != dbc.Generation {
		return true
	}
	if rs := match.Spec.Placement.ReplicaScheduling; rs == nil || rs.ReplicaSchedulingType == policyv1alpha1.ReplicaSchedulingTypeDuplicated {
		return true // no replicaScheduling means Duplicated, as in Karmada
	}
	if st.Primary != nil && d.Primary != st.Primary.Cluster {
		return true
	}
	for _, p := range st.Placements {
		if d.ShareOf(p.Cluster) == 0 {
			return true // the cluster is gone or no longer fit
		}
	}
	return false
}

// applyDecision writes a successful decision into the status, moving the primary epoch on when
// the primary changes cluster, and notes what moved in out.
func applyDecision(dbc *dbfleetv1alpha1.DatabaseCluster, d placement.Decision, now time.Time, out *Outcome) {
	old := map[string]int32{}
	byCluster := map[string]dbfleetv1alpha1.ClusterPlacement{}
	for _, p := range dbc.Status.Placements {
		old[p.Cluster] = p.Replicas
		byCluster[p.Cluster] = p
	}
	placements := make([]dbfleetv1alpha1.ClusterPlacement, 0, len(d.Shares))
	for _, share := range d.Shares {
		p := byCluster[share.Cluster] // keeps the last aggregated readiness until aggregate runs
		p.Cluster, p.Replicas, p.Ordinals = share.Cluster, share.Replicas, share.Ordinals
		p.Role = dbfleetv1alpha1.RoleReplica
		if share.Cluster == d.Primary {
			p.Role = dbfleetv1alpha1.RolePrimary
		}
		placements = append(placements, p)
		if was := old[share.Cluster]; was != share.Replicas {
			out.Moves = append(out.Moves, fmt.Sprintf("%s %d→%d", share.Cluster, was, share.Replicas))
		}
		delete(old, share.Cluster)
	}
	for cluster, was := range old {
		out.Moves = append(out.Moves, fmt.Sprintf("%s %d→0", cluster, was))
	}
	slices.Sort(out.Moves)
	dbc.Status.Placements = placements

	names := make([]string, len(placements))
	for i, p := range placements {
		names[i] = p.Cluster
	}
	dbc.Status.Clusters = strings.Join(names, ",")

	if d.Primary != "" && (dbc.Status.Primary == nil || dbc.Status.Primary.Cluster != d.Primary) {
		epoch := int64(1)
		out.PrimaryFrom = "none"
		if dbc.Status.Primary != nil {
			epoch = dbc.Status.Primary.Epoch + 1
			out.PrimaryFrom = dbc.Status.Primary.Cluster
		}
		// The preference acted on so far carries over: a failover away from the preferred
		// cluster does not ask for a switchover back to it when it returns.
		preferred := ""
		if dbc.Status.Primary != nil {
			preferred = dbc.Status.Primary.Preferred
		}
		since := metav1.NewTime(now)
		dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: d.Primary, Epoch: epoch, Since: &since, Preferred: preferred}
		out.PrimaryMoved = true
	}
	setScheduled(dbc, metav1.ConditionTrue, dbfleetv1alpha1.ReasonScheduled, scheduledMessage(d))
}

// scheduledMessage summarises a decision for the Scheduled condition. Clusters not chosen are
// grouped by reason with a few names each, so the message stays short on a fleet of thousands.
func scheduledMessage(d placement.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d replicas on", d.TotalReplicas())
	for i, share := range d.Shares {
		if i == maxListed {
			fmt.Fprintf(&b, " and %d more clusters", len(d.Shares)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s(%d)", share.Cluster, share.Replicas)
	}
	if d.Primary != "" {
		fmt.Fprintf(&b, "; primary on %s", d.Primary)
	}
	if len(d.Excluded) > 0 {
		byReason := map[string][]string{}
		var reasons []string
		for _, e := range d.Excluded {
			if _, seen := byReason[e.Reason]; !seen {
				reasons = append(reasons, e.Reason)
			}
			byReason[e.Reason] = append(byReason[e.Reason], e.Cluster)
		}
		slices.Sort(reasons)
		b.WriteString("; not chosen:")
		for i, reason := range reasons {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %d %s (%s)", len(byReason[reason]), reason, listSome(byReason[reason]))
		}
	}
	return b.String()
}

// maxListed bounds how many cluster names a message or Event lists.
const maxListed = 5

// listSome joins up to maxListed names, saying how many more there are.
func listSome(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}

// RefuseReservedNamespace marks a DatabaseCluster in a namespace that may hold no database not
// scheduled (ReasonReservedNamespace, api/v1alpha1.DatabaseClusterNamespaceRefusal) and reports
// whether it is in one; the hub and `hub plan` then place nothing for it.
func RefuseReservedNamespace(dbc *dbfleetv1alpha1.DatabaseCluster) bool {
	msg := dbfleetv1alpha1.DatabaseClusterNamespaceRefusal(dbc.Namespace)
	if msg == "" {
		return false
	}
	setScheduled(dbc, metav1.ConditionFalse, dbfleetv1alpha1.ReasonReservedNamespace, msg)
	return true
}

// setScheduled sets the Scheduled condition and reports whether it changed.
func setScheduled(dbc *dbfleetv1alpha1.DatabaseCluster, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(&dbc.Status.Conditions, metav1.Condition{
		Type: dbfleetv1alpha1.ConditionScheduled, Status: status, Reason: reason, Message: message,
		ObservedGeneration: dbc.Generation,
	})
}

// clusterSnapshot is the engine's view of the fleet for a database requesting `requests` per
// replica, without the clusters it must avoid.
func clusterSnapshot(members map[string]*dbfleetv1alpha1.MemberCluster, avoid map[string]dbfleetv1alpha1.EvictionReason,
	requests corev1.ResourceList) []placement.Cluster {
	clusters := make([]placement.Cluster, 0, len(members))
	for name, mc := range members {
		if _, skip := avoid[name]; skip {
			continue
		}
		clusters = append(clusters, placement.ClusterFromMember(mc, requests))
	}
	return clusters
}

// ClusterReady says whether the hub believes the cluster healthy (Ready=True), so that what its
// agent reports is trusted; a missing cluster is not.
func ClusterReady(mc *dbfleetv1alpha1.MemberCluster) bool {
	return mc != nil && meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady)
}

// PlacedOn reports whether the DatabaseCluster's status places replicas on cluster.
func PlacedOn(dbc *dbfleetv1alpha1.DatabaseCluster, cluster string) bool {
	for _, p := range dbc.Status.Placements {
		if p.Cluster == cluster {
			return true
		}
	}
	return false
}
