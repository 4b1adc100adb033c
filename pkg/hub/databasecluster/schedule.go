package databasecluster

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// schedule runs scheduling for the reconciler, with its metrics and Events. It holds a decision
// back while the old primary may still act (demotion, eviction, fencing) and while the eviction
// rate limit says so, noting in s why (FailoverInProgress is set from that by
// setFailoverInProgressCondition). Only an adopted decision changes the status, and only its
// evictions are counted. It returns when the DatabaseCluster must be looked at again.
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
	progress := scheduling.Progress(s.memberDBs)
	if required(dbc) {
		// Only a standby of the quorum may take the primary: the others count as having nothing.
		progress = synchronousProgress(s)
	}
	noPrimary := clockSkewed(s)
	stuck, stuckRecheck := stuckSwitchoverTarget(s, now)
	if stuck != "" {
		if noPrimary == nil {
			noPrimary = map[string]string{}
		}
		noPrimary[dbc.Status.Primary.Cluster] = stuck
	}
	out := scheduling.ScheduleMatched(planned, match, s.members, now, scheduling.Options{
		DefaultTolerationSeconds: r.DefaultTolerationSeconds,
		Avoid:                    avoid,
		Progress:                 progress,
		SwitchoverTo:             s.roll.switchoverTo,
		NoPrimary:                noPrimary,
	})
	schedulingSeconds.Observe(time.Since(start).Seconds())
	decisions.WithLabelValues(out.Reason).Inc()
	requeue := soonest(soonest(out.RequeueAfter, appDeadline), stuckRecheck)
	s.failover.pendingSwitchover = out.PendingSwitchover

	primaryMoves := out.PrimaryMoved && out.PrimaryFrom != "none"
	var promoted primaryPodChoice
	tokenSource := "" // the promotion token, when it is not the old primary's own final LSN
	if out.PrimaryMoved {
		// Inside the share too, the instance furthest in the WAL becomes the primary pod.
		promoted = choosePromotedPod(s, planned, planned.Status.Primary.Cluster)
		planned.Status.Primary.Pod = promoted.pod
	}
	if primaryMoves {
		from, to, epoch := out.PrimaryFrom, planned.Status.Primary.Cluster, planned.Status.Primary.Epoch
		old := s.members[from]
		switch {
		case scheduling.ClusterReady(old):
			// A planned move: demote first, promote only once the old cluster confirms.
			why := ""
			reason, forced := noPrimary[from]
			if forced {
				why = fmt.Sprintf(" (it cannot stay there: %s)", reason)
			}
			if !forced && !s.shareOn(from).demoting(epoch) {
				if msg, wait := switchoverNotYet(s, from, to, promoted.pod, now); msg != "" {
					// The target's reports wake the database again.
					s.failover.pendingSwitchover = msg
					return soonest(wait, requeue), nil
				}
			}
			if !s.shareOn(from).demoted(epoch) {
				s.demotion = &demotion{cluster: from, epoch: epoch}
				s.failover.hold(dbfleetv1alpha1.ReasonDemoting,
					fmt.Sprintf("demoting the primary on %s (epoch %d)%s before promoting %s", from, epoch, why, to))
				return requeue, nil
			}
			// The promotion token: the new primary replays past the old one's final LSN before it
			// takes a write. Should the old cluster stop being Ready meanwhile, this is a failover
			// (the branches below) and no longer waits for it.
			lsn, waiting := s.shareOn(from).finalLSN(dbc.Status.Primary.Epoch)
			if waiting != "" {
				// A switchover's target that never promoted hands on the token it was given.
				if token, ok := s.shareOn(from).unpromotedToken(dbc.Status.Primary, epoch); ok {
					lsn, waiting = token, ""
					tokenSource = fmt.Sprintf("the final LSN %s (handed on: %s never ran as primary at epoch %d)", token, from, dbc.Status.Primary.Epoch)
					if stuck != "" {
						// The switchover to it never took place: it stays asked for, and is
						// tried again once its target streams.
						planned.Status.Primary.Preferred = ""
					}
				}
			}
			if waiting != "" {
				s.demotion = &demotion{cluster: from, epoch: epoch}
				s.failover.hold(dbfleetv1alpha1.ReasonDemoting,
					fmt.Sprintf("the primary on %s stepped down at epoch %d%s; %s before promoting %s", from, epoch, why, waiting, to))
				return requeue, nil
			}
			planned.Status.Primary.PromoteAfterLSN = lsn
		case scheduling.PlacedOn(planned, from):
			// The old primary's cluster is unhealthy but its share is not evicted yet (its taint is
			// still tolerated): the primary stays until the eviction, which comes at grace +
			// toleration after the last renewal.
			s.failover.hold(dbfleetv1alpha1.ReasonWaitingForEviction, fmt.Sprintf(
				"primary cluster %s is not ready; the primary moves when its share is evicted (after the policy's toleration)", from))
			return requeue, nil
		default:
			if wait, reason, msg := r.failoverGate(ctx, dbc, old, s.memberDBs[from], from); wait > 0 {
				// Keep the placement in force, old share and primary included, until it is safe.
				s.failover.hold(reason, msg)
				return soonest(wait, requeue), nil
			}
			if required(dbc) {
				if msg := synchronousGate(s, to, promoted.pod); msg != "" {
					// The standbys' reports wake the database again; the requeue is a safety net.
					s.failover.hold(dbfleetv1alpha1.ReasonWaitingForSynchronousStandby, msg)
					return soonest(synchronousRecheck, requeue), nil
				}
			}
		}
	}
	if wait := r.evictionDelay(client.ObjectKeyFromObject(dbc), out.FailureEvictions(), now); wait > 0 {
		// Too many shares are leaving failed clusters at once (a hub-side network fault looks like
		// that too): keep this placement a little longer.
		evictionsDelayed.Inc()
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, "EvictionDelayed", "Evict",
			"eviction rate limit reached; moving %d shares off failed clusters in %s", out.FailureEvictions(), wait.Round(time.Millisecond))
		if primaryMoves {
			s.failover.hold(dbfleetv1alpha1.ReasonEvictionRateLimited, fmt.Sprintf(
				"the primary moves from %s to %s once the eviction rate limit lets its shares go", out.PrimaryFrom, planned.Status.Primary.Cluster))
		}
		return soonest(wait, requeue), nil
	}

	// Adopted.
	dbc.Status = planned.Status
	for reason, n := range out.Evictions {
		evictions.WithLabelValues(string(reason)).Add(float64(n))
	}
	if primaryMoves {
		s.failover.promoted = fmt.Sprintf("primary moved from %s to %s at epoch %d, on %s; waiting for it to be ready",
			out.PrimaryFrom, dbc.Status.Primary.Cluster, dbc.Status.Primary.Epoch, promoted.describe())
		if lsn := dbc.Status.Primary.PromoteAfterLSN; lsn != "" {
			if tokenSource == "" {
				tokenSource = fmt.Sprintf("%s's final LSN %s", out.PrimaryFrom, lsn)
			}
			s.failover.promoted = fmt.Sprintf("primary moved from %s to %s at epoch %d, on %s; waiting for it to replay past %s and be ready",
				out.PrimaryFrom, dbc.Status.Primary.Cluster, dbc.Status.Primary.Epoch, promoted.describe(), tokenSource)
		}
		promotions.Inc()
	}

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
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, dbfleetv1alpha1.ReasonScheduled, "Schedule", "%s; primary on %s at epoch %d",
			listSome(out.Moves), dbc.Status.Primary.Cluster, dbc.Status.Primary.Epoch)
		return requeue, nil
	}
	if out.PrimaryMoved {
		handover := ""
		if tokenSource != "" {
			handover = fmt.Sprintf(" (switchover: promoted after replaying past %s)", tokenSource)
		}
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "PrimaryChanged", "Promote", "%s", truncate(fmt.Sprintf(
			"primary moved from %s to %s at epoch %d%s, on %s", out.PrimaryFrom, dbc.Status.Primary.Cluster, dbc.Status.Primary.Epoch, handover, promoted.describe())))
	}
	if len(out.Moves) > 0 {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "ReplicasMoved", "Schedule", "%s", listSome(out.Moves))
	}
	return requeue, nil
}

// synchronousRecheck is when a failover held for its synchronous standbys is looked at again,
// should no report of theirs wake it first.
const synchronousRecheck = 30 * time.Second

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

// maxListed bounds how many cluster names a message or Event lists.
const maxListed = 5

// listSome joins up to maxListed names, saying how many more there are.
func listSome(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
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
