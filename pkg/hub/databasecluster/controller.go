package databasecluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/ownwrites"
	"github.com/dbfleet/dbfleet/pkg/policy"
)

// Name is the controller's name in the hub's --controllers list.
const Name = "databasecluster"

// Reconciler places, propagates and aggregates one DatabaseCluster at a time.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// Liveness is the hub's own view of agent renewals (the clusterhealth controller's), which
	// the failover gate reads. Required: no other clock tells when an agent has certainly fenced.
	Liveness Liveness
	// DefaultTolerationSeconds is --default-unreachable-toleration; nil: the engine's default.
	DefaultTolerationSeconds *int64
	// EvictionLimiter bounds how fast shares leave failed clusters, hub-wide; nil: no limit.
	EvictionLimiter *rate.Limiter
	// UnhealthyClusterThreshold is the share of a database's clusters not Ready at once that
	// pauses its evictions for failure (disruption); 0: DefaultUnhealthyClusterThreshold.
	UnhealthyClusterThreshold float64
	// DisruptionSettle is how long evictions for failure stay paused after a disruption was
	// last seen (the hub's --cluster-grace-period).
	DisruptionSettle time.Duration
	// disrupted remembers when a disruption was last seen.
	disrupted disruptionMemory

	// evictionGrants remembers the databases let through EvictionLimiter in the last
	// evictionGrantTTL (types.NamespacedName → time.Time), so that a reconcile that took tokens
	// but failed to record its eviction (a status write conflict, say) does not pay again on
	// its retry and wait a whole refill for an eviction already counted.
	evictionGrants sync.Map
	// policies keeps the policies' parsed label selectors between reconciles.
	policies policy.Matcher
	// written holds the resourceVersion of this controller's last write of each DatabaseCluster
	// until the cache shows it.
	written ownwrites.Tracker
}

// scope is what one reconcile gathers and decides; the phase functions fill it in turn.
type scope struct {
	dbc *dbfleetv1alpha1.DatabaseCluster
	// members are all MemberClusters, by name.
	members map[string]*dbfleetv1alpha1.MemberCluster
	// memberDBs are the DatabaseCluster's existing MemberDatabases, by cluster.
	memberDBs map[string]*dbfleetv1alpha1.MemberDatabase
	// propagationErrors are the clusters whose MemberDatabase could not be written.
	propagationErrors map[string]error
	// demotion, when set, is a planned primary move waiting for the old primary to step down.
	demotion *demotion
	// failover is what scheduling learnt of the primary's moves, for FailoverInProgress.
	failover failoverFacts
	// roll is what a version roll does in this reconcile: which shares keep their version, and
	// whether the primary is to be switched over to a share on the new version.
	roll rollPlan
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	log := ctrl.LoggerFrom(ctx).WithValues("DatabaseCluster", req.NamespacedName)
	ctx = ctrl.LoggerInto(ctx, log)

	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, dbc); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.written.Behind(req.NamespacedName, dbc.ResourceVersion) {
		// The MemberDatabases a reconcile creates wake the database again before the cache has
		// its status write: acting on the older copy would place it a second time, with a second
		// Event and status write. The watch event of our write brings it back; the requeue is
		// only a safety net.
		staleReads.Inc()
		return ctrl.Result{RequeueAfter: staleRecheck}, nil
	}
	before := dbc.DeepCopy()
	defer func() {
		if err := r.writeStatus(ctx, before, dbc); err != nil {
			retErr = kerrors.NewAggregate([]error{retErr, err})
		}
		if dbc.ResourceVersion != before.ResourceVersion {
			r.written.Wrote(req.NamespacedName, dbc.ResourceVersion)
		}
	}()

	s := &scope{dbc: dbc, propagationErrors: map[string]error{}}
	if err := r.load(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if !dbc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	if controllerutil.AddFinalizer(dbc, dbfleetv1alpha1.DatabaseClusterFinalizer) {
		if err := r.Client.Patch(ctx, dbc, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	return r.reconcileNormal(ctx, s)
}

func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	if r.refuseReservedNamespace(s.dbc) {
		return ctrl.Result{}, nil
	}
	failoverBefore := meta.FindStatusCondition(s.dbc.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress).DeepCopy()
	progressingBefore := meta.FindStatusCondition(s.dbc.Status.Conditions, dbfleetv1alpha1.ConditionProgressing).DeepCopy()
	failsafeBefore := meta.IsStatusConditionTrue(s.dbc.Status.Conditions, dbfleetv1alpha1.ConditionPrimaryFailsafe)
	// Planned before scheduling for its switchover, again after it for the shares' versions: the
	// primary may have moved.
	s.roll = planRollOf(s)
	requeue, err := r.schedule(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	r.repromoteAbandonedDemotion(s, now)
	requeue = soonest(requeue, r.replaceLostPrimaryPod(s, now))
	r.repromoteFencedPrimary(s, now)
	namePrimaryPod(s.dbc)
	recordSynchronous(s)
	requeue = soonest(requeue, r.purgeEvictions(s, now))
	s.roll = planRollOf(s)
	propagateErr := r.propagate(ctx, s)
	updateStatus(s)
	r.recordFailover(s.dbc, failoverBefore)
	r.recordRoll(s.dbc, progressingBefore)
	r.recordFailsafe(s.dbc, failsafeBefore)
	recordReadiness(s.dbc)
	if propagateErr != nil {
		return ctrl.Result{}, propagateErr
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// load reads the MemberClusters and the DatabaseCluster's MemberDatabases.
func (r *Reconciler) load(ctx context.Context, s *scope) error {
	members := &dbfleetv1alpha1.MemberClusterList{}
	// Read-only: copying every MemberCluster out of the cache on every reconcile was the hub's
	// largest CPU cost at 1,000 clusters (docs/performance.md).
	if err := r.Client.List(ctx, members, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list MemberClusters: %w", err)
	}
	s.members = make(map[string]*dbfleetv1alpha1.MemberCluster, len(members.Items))
	for i := range members.Items {
		s.members[members.Items[i].Name] = &members.Items[i]
	}
	mdbs, err := memberDatabasesOf(ctx, r.Client, s.dbc)
	if err != nil {
		return fmt.Errorf("list MemberDatabases: %w", err)
	}
	s.memberDBs = make(map[string]*dbfleetv1alpha1.MemberDatabase, len(mdbs))
	for i := range mdbs {
		cluster := mdbs[i].Labels[dbfleetv1alpha1.LabelCluster]
		if cluster == "" || mdbs[i].Namespace != dbfleetv1alpha1.MemberNamespace(cluster) {
			continue // not written by the hub: never touch it
		}
		s.memberDBs[cluster] = &mdbs[i]
	}
	return nil
}

// writeStatus patches the status when, and only when, the reconcile changed it.
func (r *Reconciler) writeStatus(ctx context.Context, before, dbc *dbfleetv1alpha1.DatabaseCluster) error {
	dbc.Status.ObservedGeneration = dbc.Generation
	if equality.Semantic.DeepEqual(before.Status, dbc.Status) {
		return nil
	}
	// The finalizer patch may have moved the object on; the status patch is computed against the
	// status we read, which is all it touches.
	base := dbc.DeepCopy()
	base.Status = before.Status
	if err := r.Client.Status().Patch(ctx, dbc, client.MergeFrom(base)); err != nil {
		if !dbc.DeletionTimestamp.IsZero() && client.IgnoreNotFound(err) == nil {
			return nil // deleted while we worked
		}
		return fmt.Errorf("write status: %w", err)
	}
	statusWrites.Inc()
	return nil
}

// errPropagation marks propagation failures, which are already reported in conditions and Events.
var errPropagation = errors.New("propagation failed")

// staleRecheck is when a reconcile that found the cache behind its own last write looks again,
// should the watch event of that write not have woken it by then.
const staleRecheck = 5 * time.Second

// requeueAfter caps how long a DatabaseCluster waits for a time-based change (a toleration running
// out) before it is looked at again.
const requeueAfter = 5 * time.Minute
