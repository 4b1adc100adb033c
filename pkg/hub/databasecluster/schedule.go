package databasecluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/pkg/policy"
)

// Reasons of the Scheduled condition.
const (
	ReasonScheduled        = "Scheduled"
	ReasonNoPolicy         = "NoPolicy"
	ReasonUnschedulable    = "Unschedulable"
	ReasonInvalidPlacement = "InvalidPlacement"
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
	// FailureEvictions counts the shares moved off failed clusters or failed applications (for
	// the eviction rate limit), kept or purged at once.
	FailureEvictions int
	// PrimaryMoved is set when the primary changed cluster; Primary then holds the new one.
	PrimaryMoved bool
	// PrimaryFrom is the cluster the primary left ("none" for a first primary).
	PrimaryFrom string
	// RequeueAfter is when a NoExecute toleration runs out and the placement may change; zero if
	// none is pending.
	RequeueAfter time.Duration
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
	return scheduleMatched(dbc, policy.Select(dbc, pps, cpps), members, now, opts)
}

// scheduleMatched is Schedule once the winning policy (nil for none) is known. It reads the
// policy and the members and never changes them: the hub passes objects shared with its cache.
func scheduleMatched(dbc *dbfleetv1alpha1.DatabaseCluster, match *policy.Match, members map[string]*dbfleetv1alpha1.MemberCluster,
	now time.Time, opts Options) Outcome {
	out := Outcome{Match: match}
	if out.Match == nil {
		dbc.Status.Policy = nil
		out.Reason = ReasonNoPolicy
		setScheduled(dbc, metav1.ConditionFalse, ReasonNoPolicy,
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
		out.Err, out.Reason = err, ReasonUnschedulable
		var unschedulable *placement.UnschedulableError
		if !errors.As(err, &unschedulable) {
			out.Reason = ReasonInvalidPlacement
		}
		setScheduled(dbc, metav1.ConditionFalse, out.Reason, err.Error()+"; current placement (if any) is kept")
		return out
	}
	decision.Excluded = withAvoided(decision.Excluded, opts.Avoid)
	out.Decision, out.Reason = &decision, ReasonScheduled
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
	if dbc.Status.Primary != nil {
		dbc.Status.Primary.Preferred = preferred
	}
	return out
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

// schedule runs Schedule for the reconciler, with its metrics and Events. It holds a decision
// back while the old primary may still act (demotion, eviction, fencing) and while the eviction
// rate limit says so. It returns when the DatabaseCluster must be looked at again.
func (r *Reconciler) schedule(ctx context.Context, s *scope) (time.Duration, error) {
	dbc := s.dbc
	// The policies are the cache's own objects (no deep copy of 400 policies per reconcile):
	// scheduling only reads them.
	pps := &dbfleetv1alpha1.PropagationPolicyList{}
	if err := r.Client.List(ctx, pps, client.InNamespace(dbc.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("list PropagationPolicies: %w", err)
	}
	cpps := &dbfleetv1alpha1.ClusterPropagationPolicyList{}
	if err := r.Client.List(ctx, cpps, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("list ClusterPropagationPolicies: %w", err)
	}
	before := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled).DeepCopy()
	now := r.Clock.Now()
	match := r.policies.Select(dbc, pps.Items, cpps.Items)
	var failover *dbfleetv1alpha1.FailoverBehavior
	if match != nil {
		failover = match.Spec.Failover
	}
	avoid, appDeadline := avoidClusters(s, failover, now)
	start := time.Now()
	// Schedule on a copy: a failover may have to wait for the old primary to fence itself.
	planned := dbc.DeepCopy()
	out := scheduleMatched(planned, match, s.members, now, Options{
		DefaultTolerationSeconds: r.DefaultTolerationSeconds,
		Avoid:                    avoid,
	})
	schedulingSeconds.Observe(time.Since(start).Seconds())
	decisions.WithLabelValues(out.Reason).Inc()
	requeue := soonest(out.RequeueAfter, appDeadline)

	if out.PrimaryMoved && out.PrimaryFrom != "none" {
		from, to, epoch := out.PrimaryFrom, planned.Status.Primary.Cluster, planned.Status.Primary.Epoch
		old := s.members[from]
		if clusterReady(old) {
			// A planned move: demote first, promote only once the old cluster confirms.
			if !demoted(s.memberDBs[from], epoch) {
				s.demotion = &demotion{cluster: from, epoch: epoch}
				msg := fmt.Sprintf("demoting the primary on %s (epoch %d) before promoting %s", from, epoch, to)
				if setFailover(dbc, metav1.ConditionTrue, ReasonDemoting, msg) {
					r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, ReasonDemoting, "Demote", "%s", msg)
				}
				return requeue, nil
			}
		} else if placedOn(planned, from) {
			// The old primary's cluster is unhealthy but its share is not evicted yet (its taint is
			// still tolerated): the primary stays until the eviction, which comes at grace +
			// toleration after the last renewal.
			msg := fmt.Sprintf("primary cluster %s is not ready; the primary moves when its share is evicted (after the policy's toleration)", from)
			if setFailover(dbc, metav1.ConditionTrue, ReasonWaitingForEviction, msg) {
				r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, ReasonWaitingForEviction, "Failover", "%s", msg)
			}
			return requeue, nil
		} else if wait, reason, msg := r.failoverGate(ctx, dbc, old, from, now); wait > 0 {
			// Keep the placement in force, old share and primary included, until it is safe.
			if setFailover(dbc, metav1.ConditionTrue, reason, msg) {
				r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, reason, "Failover", "%s", msg)
			}
			return soonest(wait, requeue), nil
		}
	}
	if wait := r.evictionDelay(client.ObjectKeyFromObject(dbc), out.FailureEvictions, now); wait > 0 {
		// Too many shares are leaving failed clusters at once (a hub-side network fault looks like
		// that too): keep this placement a little longer.
		evictionsDelayed.Inc()
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, "EvictionDelayed", "Evict",
			"eviction rate limit reached; moving %d shares off failed clusters in %s", out.FailureEvictions, wait.Round(time.Millisecond))
		return soonest(wait, requeue), nil
	}
	if out.PrimaryMoved && out.PrimaryFrom != "none" {
		setFailover(planned, metav1.ConditionTrue, ReasonPromoted, fmt.Sprintf(
			"primary moved from %s to %s at epoch %d; waiting for it to be ready", out.PrimaryFrom, planned.Status.Primary.Cluster, planned.Status.Primary.Epoch))
		promotions.Inc()
	}
	dbc.Status = planned.Status

	after := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled)
	if out.Err != nil && (before == nil || before.Reason != after.Reason || before.Message != after.Message) {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, out.Reason, "Schedule", "%s", truncate(out.Err.Error()))
	}
	if len(out.Evicted) > 0 {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, "Evicted", "Evict", "%s", truncate(evictionSummary(out.Evicted)))
	}
	if out.PrimaryMoved && out.PrimaryFrom == "none" && len(out.Moves) > 0 {
		// The first placement: one Event, not two (Events are API writes too, and this one
		// comes with every database created).
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, ReasonScheduled, "Schedule", "%s; primary on %s at epoch %d",
			listSome(out.Moves), dbc.Status.Primary.Cluster, dbc.Status.Primary.Epoch)
		return requeue, nil
	}
	if out.PrimaryMoved {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "PrimaryChanged", "Promote",
			"primary moved from %s to %s at epoch %d", out.PrimaryFrom, dbc.Status.Primary.Cluster, dbc.Status.Primary.Epoch)
	}
	if len(out.Moves) > 0 {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "ReplicasMoved", "Schedule", "%s", listSome(out.Moves))
	}
	return requeue, nil
}

// evictionGrantTTL is how long a database's pass through the eviction limit stays valid for its
// retries.
const evictionGrantTTL = time.Minute

// evictionDelay takes n evictions of the database db from the hub-wide eviction rate limit, or
// says how long to wait for them (zero: go ahead). A batch larger than the burst waits for a full
// bucket. A database let through less than evictionGrantTTL ago goes ahead without new tokens.
func (r *Reconciler) evictionDelay(db types.NamespacedName, n int, now time.Time) time.Duration {
	if n == 0 || r.EvictionLimiter == nil {
		return 0
	}
	if granted, ok := r.evictionGrants.Load(db); ok && now.Sub(granted.(time.Time)) < evictionGrantTTL {
		return 0
	}
	n = min(n, r.EvictionLimiter.Burst())
	res := r.EvictionLimiter.ReserveN(now, n)
	if !res.OK() {
		return 0 // an infinite rate
	}
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return wait
	}
	r.evictionGrants.Range(func(key, granted any) bool {
		if now.Sub(granted.(time.Time)) >= evictionGrantTTL {
			r.evictionGrants.Delete(key)
		}
		return true
	})
	r.evictionGrants.Store(db, now)
	return 0
}

// soonest is the smaller positive duration of a and b (zero when neither is positive).
func soonest(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	}
	return min(a, b)
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
		since := metav1.NewTime(now)
		dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: d.Primary, Epoch: epoch, Since: &since}
		out.PrimaryMoved = true
	}
	setScheduled(dbc, metav1.ConditionTrue, ReasonScheduled, scheduledMessage(d))
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

// truncate keeps an Event note within the API's 1024 characters.
func truncate(s string) string {
	const limit = 1000
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// placedOn reports whether the DatabaseCluster's status places replicas on cluster.
func placedOn(dbc *dbfleetv1alpha1.DatabaseCluster, cluster string) bool {
	for _, p := range dbc.Status.Placements {
		if p.Cluster == cluster {
			return true
		}
	}
	return false
}
