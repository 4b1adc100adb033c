package databasecluster

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/policy"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// schedule runs scheduling for the reconciler, with its metrics and Events. A decision that
// moves the primary is adopted only once the move's steps let it go on (primaryMove: demotion,
// promotion token, eviction, fencing, the synchronous quorum), and any decision only while the
// eviction rate limit allows; until then s notes why (FailoverInProgress is set from that by
// setFailoverInProgressCondition). Only an adopted decision changes the status, and only its
// evictions are counted. It returns when the DatabaseCluster must be looked at again.
func (r *Reconciler) schedule(ctx context.Context, s *scope) (time.Duration, error) {
	now := r.Clock.Now()
	in, err := r.schedulingInputs(ctx, s, now)
	if err != nil {
		return 0, err
	}
	before := meta.FindStatusCondition(s.dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled).DeepCopy()
	// Schedule on a copy: it is adopted only once nothing holds it back.
	planned := s.dbc.DeepCopy()
	start := time.Now()
	out := scheduling.ScheduleMatched(planned, in.match, s.members, now, in.options)
	schedulingSeconds.Observe(time.Since(start).Seconds())
	decisions.WithLabelValues(out.Reason).Inc()
	requeue := soonest(out.RequeueAfter, in.recheck)
	s.failover.pendingSwitchover = out.PendingSwitchover

	move := primaryMoveOf(s, planned, out, in)
	why, wait := r.disrupted.note(client.ObjectKeyFromObject(s.dbc), disruption(s.members, placedClusters(s.dbc), r.unhealthyClusterThreshold()), now, r.DisruptionSettle)
	if why != "" && out.FailureEvictions() > 0 {
		evictionsPaused.Inc()
		r.Recorder.Eventf(s.dbc, nil, corev1.EventTypeWarning, "EvictionsPaused", "Evict", "%s", why)
		if move != nil {
			s.failover.hold(dbfleetv1alpha1.ReasonEvictionsPaused, fmt.Sprintf("the primary stays on %s: %s", move.from, why))
		}
		return soonest(wait, requeue), nil
	}
	if move != nil {
		if h := r.gate(ctx, s, move, planned, now); h != nil {
			move.holdOn(s, h)
			return soonest(h.wait, requeue), nil
		}
		move.applyTo(planned)
	}
	if wait := r.evictionDelay(client.ObjectKeyFromObject(s.dbc), out.FailureEvictions(), now); wait > 0 {
		// Too many shares are leaving failed clusters at once (a hub-side network fault looks like
		// that too): keep this placement a little longer.
		evictionsDelayed.Inc()
		r.Recorder.Eventf(s.dbc, nil, corev1.EventTypeWarning, "EvictionDelayed", "Evict",
			"eviction rate limit reached; moving %d shares off failed clusters in %s", out.FailureEvictions(), wait.Round(time.Millisecond))
		if move != nil {
			s.failover.hold(dbfleetv1alpha1.ReasonEvictionRateLimited, fmt.Sprintf(
				"the primary moves from %s to %s once the eviction rate limit lets its shares go", move.from, move.to))
		}
		return soonest(wait, requeue), nil
	}
	r.adopt(s, planned, out, move)
	r.recordDecision(s.dbc, before, out, move)
	return requeue, nil
}

// unhealthyClusterThreshold is UnhealthyClusterThreshold, or its default.
func (r *Reconciler) unhealthyClusterThreshold() float64 {
	if r.UnhealthyClusterThreshold > 0 {
		return r.UnhealthyClusterThreshold
	}
	return DefaultUnhealthyClusterThreshold
}

// schedulingInputs is what scheduling decides from besides the DatabaseCluster and the members.
type schedulingInputs struct {
	match   *policy.Match
	options scheduling.Options
	// stuck is why the primary cannot stay on its cluster as a switchover target that never gets
	// its token's WAL (stuckSwitchoverTarget), "" otherwise.
	stuck string
	// recheck is when the inputs change with time alone (an application failover's toleration,
	// a switchover target's replay timeout).
	recheck time.Duration
}

// schedulingInputs matches the policy and gathers scheduling's options: clusters to avoid, the
// shares' WAL progress (with dataDurability required, the quorum's only), and clusters that must
// not hold the primary.
func (r *Reconciler) schedulingInputs(ctx context.Context, s *scope, now time.Time) (schedulingInputs, error) {
	dbc := s.dbc
	// The policies are the cache's own objects (no deep copy of 400 policies per reconcile):
	// scheduling only reads them.
	pps := &dbfleetv1alpha1.PropagationPolicyList{}
	if err := r.Client.List(ctx, pps, client.InNamespace(dbc.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return schedulingInputs{}, fmt.Errorf("list PropagationPolicies: %w", err)
	}
	cpps := &dbfleetv1alpha1.ClusterPropagationPolicyList{}
	if err := r.Client.List(ctx, cpps, client.UnsafeDisableDeepCopy); err != nil {
		return schedulingInputs{}, fmt.Errorf("list ClusterPropagationPolicies: %w", err)
	}
	in := schedulingInputs{match: r.policies.Select(dbc, pps.Items, cpps.Items)}
	var failover *dbfleetv1alpha1.FailoverBehavior
	if in.match != nil {
		failover = in.match.Spec.Failover
	}
	avoid, appDeadline := avoidClusters(s, failover, now)
	progress := scheduling.Progress(s.memberDBs)
	if required(dbc) {
		// Only a standby of the quorum may take the primary: the others count as having nothing.
		progress = synchronousProgress(s)
	}
	noPrimary := clockSkewed(s)
	if why := lostPrimaryElsewhere(s); why != "" {
		if noPrimary == nil {
			noPrimary = map[string]string{}
		}
		noPrimary[dbc.Status.Primary.Cluster] = why
	}
	stuck, stuckRecheck := stuckSwitchoverTarget(s, now)
	if stuck != "" {
		if noPrimary == nil {
			noPrimary = map[string]string{}
		}
		noPrimary[dbc.Status.Primary.Cluster] = stuck
	}
	in.stuck, in.recheck = stuck, soonest(appDeadline, stuckRecheck)
	in.options = scheduling.Options{
		DefaultTolerationSeconds: r.DefaultTolerationSeconds,
		Avoid:                    avoid,
		Progress:                 progress,
		SwitchoverTo:             s.roll.switchoverTo,
		NoPrimary:                noPrimary,
	}
	return in, nil
}

// primaryMoveOf is the move of the primary the decision out makes, nil when the primary stays or
// is placed for the first time. Inside the target share too, the instance furthest in the WAL
// becomes the primary pod (on a first placement as well: planned names it either way).
func primaryMoveOf(s *scope, planned *dbfleetv1alpha1.DatabaseCluster, out scheduling.Outcome, in schedulingInputs) *primaryMove {
	if !out.PrimaryMoved {
		return nil
	}
	promoted := choosePromotedPod(s, planned, planned.Status.Primary.Cluster)
	planned.Status.Primary.Pod = promoted.pod
	if out.PrimaryFrom == "none" {
		return nil
	}
	forcedBy, forced := in.options.NoPrimary[out.PrimaryFrom]
	return &primaryMove{from: out.PrimaryFrom, to: planned.Status.Primary.Cluster, current: s.dbc.Status.Primary,
		epoch: planned.Status.Primary.Epoch, promoted: promoted, forced: forced, forcedBy: forcedBy, stuckTarget: in.stuck != ""}
}

// adopt makes the decision the database's status and counts what it did.
func (r *Reconciler) adopt(s *scope, planned *dbfleetv1alpha1.DatabaseCluster, out scheduling.Outcome, move *primaryMove) {
	s.dbc.Status = planned.Status
	for reason, n := range out.Evictions {
		evictions.WithLabelValues(string(reason)).Add(float64(n))
	}
	if move == nil {
		return
	}
	p := s.dbc.Status.Primary
	s.failover.promoted = fmt.Sprintf("primary moved from %s to %s at epoch %d, on %s; waiting for it to be ready",
		move.from, p.Cluster, p.Epoch, move.promoted.describe())
	if token := move.describeToken(); token != "" {
		s.failover.promoted = fmt.Sprintf("primary moved from %s to %s at epoch %d, on %s; waiting for it to replay past %s and be ready",
			move.from, p.Cluster, p.Epoch, move.promoted.describe(), token)
	}
	promotions.Inc()
}

// recordDecision raises the Events of an adopted decision (before is the Scheduled condition as
// the reconcile found it).
func (r *Reconciler) recordDecision(dbc *dbfleetv1alpha1.DatabaseCluster, before *metav1.Condition, out scheduling.Outcome, move *primaryMove) {
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
		return
	}
	if move != nil {
		handover := ""
		if token := move.describeToken(); token != "" {
			handover = fmt.Sprintf(" (switchover: promoted after replaying past %s)", token)
		}
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "PrimaryChanged", "Promote", "%s", truncate(fmt.Sprintf(
			"primary moved from %s to %s at epoch %d%s, on %s", move.from, dbc.Status.Primary.Cluster, dbc.Status.Primary.Epoch, handover, move.promoted.describe())))
	}
	if len(out.Moves) > 0 {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "ReplicasMoved", "Schedule", "%s", listSome(out.Moves))
	}
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
