package databasecluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/predicates"
	"github.com/dbfleet/dbfleet/pkg/queue"
)

// The hub's RBAC is generated from these markers into deploy/hub/rbac (make manifests).
// +kubebuilder:rbac:groups=dbfleet.io,resources=databaseclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=dbfleet.io,resources=databaseclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=dbfleet.io,resources=databaseclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=dbfleet.io,resources=propagationpolicies;clusterpropagationpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=dbfleet.io,resources=memberclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=dbfleet.io,resources=memberdatabases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup registers the controller and its MemberDatabase index with the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg hub.Config) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &dbfleetv1alpha1.MemberDatabase{}, databaseRefIndex, indexDatabaseRef); err != nil {
		return fmt.Errorf("index MemberDatabases by database: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &dbfleetv1alpha1.DatabaseCluster{}, placedOnIndex, indexPlacedOn); err != nil {
		return fmt.Errorf("index DatabaseClusters by cluster: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &dbfleetv1alpha1.DatabaseCluster{}, unscheduledIndex, indexUnscheduled); err != nil {
		return fmt.Errorf("index unscheduled DatabaseClusters: %w", err)
	}
	r := &Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder("dbfleet-hub"),
		Clock:    clock.RealClock{},
	}
	if cfg.Liveness != nil { // a nil *liveness.Observer must stay a nil Liveness
		r.Liveness = cfg.Liveness
	}
	if t := cfg.DefaultUnreachableToleration; t != nil {
		seconds := int64(*t / time.Second)
		r.DefaultTolerationSeconds = &seconds
	}
	r.UnhealthyClusterThreshold, r.DisruptionSettle = cfg.UnhealthyClusterThreshold, cfg.ClusterGracePeriod
	if cfg.EvictionRate > 0 {
		r.EvictionLimiter = rate.NewLimiter(rate.Limit(cfg.EvictionRate), max(cfg.EvictionBurst, 1))
	}
	return r.SetupWithManager(mgr)
}

// SetupWithManager wires the watches: the DatabaseCluster itself (spec, labels, annotations and
// deletion, not its own status writes), its MemberDatabases, the policies that may select it, and
// the MemberClusters whose placement-relevant state changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Liveness == nil {
		return errors.New("the databasecluster controller needs the hub's liveness observer (hub.Config.Liveness, fed by the clusterhealth controller): its failover gate promotes only on a silence the hub observed itself")
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(controller.Options{NewQueue: queue.New[reconcile.Request](mgr.GetLogger())}).
		For(&dbfleetv1alpha1.DatabaseCluster{}, builder.WithPredicates(predicates.NotStatusOnly())).
		Watches(&dbfleetv1alpha1.MemberDatabase{}, memberDatabaseEvents(r.sharesOf)).
		Watches(&dbfleetv1alpha1.PropagationPolicy{}, skipInitialList(r.databasesInNamespace)).
		Watches(&dbfleetv1alpha1.ClusterPropagationPolicy{}, skipInitialList(r.allDatabases)).
		Watches(&dbfleetv1alpha1.MemberCluster{}, r.memberClusterHandler(), builder.WithPredicates(placementRelevantChange())).
		Complete(r)
}

// placementRelevantChange ignores MemberCluster updates that cannot change a placement or a
// share's state, such as heartbeat timestamps, so a steady fleet causes no reconciles.
func placementRelevantChange() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, okOld := e.ObjectOld.(*dbfleetv1alpha1.MemberCluster)
			cur, okNew := e.ObjectNew.(*dbfleetv1alpha1.MemberCluster)
			if !okOld || !okNew {
				return true
			}
			return !equality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
				!equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
				readyStatus(old) != readyStatus(cur) ||
				!equality.Semantic.DeepEqual(old.Status.ResourceSummary, cur.Status.ResourceSummary)
		},
	}
}

func readyStatus(mc *dbfleetv1alpha1.MemberCluster) string {
	if c := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady); c != nil {
		return string(c.Status)
	}
	return ""
}

// availabilityPriority is the work-queue priority of a database one of whose shares became
// Available or stopped being Available, was fenced or unfenced, acknowledged a new epoch, or went
// away, above the default 0 of a database created or edited.
const availabilityPriority = 1

// reportBatch is how long an urgent report (see urgentReport) waits in the queue for the reports
// of the database's other shares, so that one reconcile (and one status write) takes them all: a
// share reports twice (applied, then ready), and a database of three shares otherwise cost up to
// six DatabaseCluster status writes. It waits only while there is something to wait for: see
// reportDelay.
const reportBatch = time.Second

// progressBatch is how long any other report waits: a share's first report (applied, not yet
// ready) changes only its placement's state from Pending to Progressing, and a DatabaseCluster
// status write for that alone was about one of the three such writes per database. Its ready
// report, if it comes within progressBatch, brings the reconcile forward to reportBatch (or to
// now) and one write carries both.
const progressBatch = 5 * time.Second

// memberDatabaseEvents enqueues a MemberDatabase's database. A share that became Available (or
// stopped being so) goes ahead of the databases waiting to be placed: finishing what was started
// first. Without it, a burst of 10,000 creates filled the FIFO queue, and a database whose shares
// were all Available waited behind every unplaced one for the reconcile that reports it (minutes
// at 1,000 clusters). Only availability changes jump the queue: when every agent report did, at
// 1,000 clusters the reports alone outran the hub's reconciles and new databases starved.
// Urgent reports are batched for reportBatch unless nothing is left to batch (reportDelay);
// initial-list and resync events stay low priority, as controller-runtime's own handlers do.
// shares lists a database's MemberDatabases (from the cache); nil: only the report itself is
// known, and an urgent report is always batched.
func memberDatabaseEvents(shares func(ctx context.Context, mdb *dbfleetv1alpha1.MemberDatabase) []dbfleetv1alpha1.MemberDatabase) handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object, priority int, after time.Duration) {
		addWithPriority(q, priority, after, databaseOfMember(obj)...)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			priority := 0
			if e.IsInInitialList {
				priority = handler.LowPriority
			}
			enqueue(q, e.Object, priority, 0)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			priority := 0
			switch {
			case e.ObjectOld.GetResourceVersion() == e.ObjectNew.GetResourceVersion():
				priority = handler.LowPriority
			case urgentReport(e.ObjectOld, e.ObjectNew):
				after := reportBatch
				if handoverReport(e.ObjectOld, e.ObjectNew) {
					after = 0
				} else if cur, ok := e.ObjectNew.(*dbfleetv1alpha1.MemberDatabase); ok && shares != nil {
					after = reportDelay(cur, shares(ctx, cur))
				}
				enqueue(q, e.ObjectNew, availabilityPriority, after)
				return
			}
			enqueue(q, e.ObjectNew, priority, progressBatch)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object, availabilityPriority, 0)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, e.Object, 0, 0)
		},
	}
}

// reportDelay is how long an urgent report cur waits for the reports of its database's other
// shares (all its MemberDatabases, cur's own entry included or not): none when every share,
// cur with the others, is Available at its current generation, since no report of theirs is
// still to come to batch with it; reportBatch otherwise. A database on a quiet fleet so goes
// Available with its last share's report, where it waited a second for a batch of one; under
// load the batches are the ones they were, closed early only by the report that completes
// them, so no more status writes are made than before. An earlier report of the database
// still waiting in the queue is brought forward with it (the queue keeps the earlier time).
func reportDelay(cur *dbfleetv1alpha1.MemberDatabase, shares []dbfleetv1alpha1.MemberDatabase) time.Duration {
	if !settled(cur) {
		return reportBatch
	}
	for i := range shares {
		s := &shares[i]
		if s.Namespace == cur.Namespace && s.Name == cur.Name {
			continue // the report itself: the cache may hold it already or not
		}
		if !settled(s) {
			return reportBatch
		}
	}
	return 0
}

// settled says a share has reported on its current spec and is Available: nothing more is
// expected of it until something changes.
func settled(mdb *dbfleetv1alpha1.MemberDatabase) bool {
	return mdb.DeletionTimestamp.IsZero() && mdb.Status.ObservedGeneration == mdb.Generation &&
		meta.IsStatusConditionTrue(mdb.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
}

// sharesOf lists the MemberDatabases of mdb's database from the cache, read-only.
func (r *Reconciler) sharesOf(ctx context.Context, mdb *dbfleetv1alpha1.MemberDatabase) []dbfleetv1alpha1.MemberDatabase {
	list := &dbfleetv1alpha1.MemberDatabaseList{}
	ref := mdb.Spec.DatabaseRef
	if err := r.Client.List(ctx, list, client.MatchingFields{databaseRefIndex: databaseRefKey(ref.Namespace, ref.Name)}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List the shares of a database to decide whether to batch a report", "database", ref.Namespace+"/"+ref.Name)
		return []dbfleetv1alpha1.MemberDatabase{{}} // one share not known to be settled: batch
	}
	return list.Items
}

// addWithPriority adds reqs at priority once after has passed, through the priority queue the
// controller uses (a plain queue, as in some tests, ignores the priority). A request already
// queued keeps the higher of its priorities.
func addWithPriority(q workqueue.TypedRateLimitingInterface[reconcile.Request], priority int, after time.Duration, reqs ...reconcile.Request) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(priority), After: after}, reqs...)
		return
	}
	for _, req := range reqs {
		q.AddAfter(req, after)
	}
}

// urgentReport says whether an agent's report changes whether the database has a working
// primary: the share's availability, its fencing (a fenced primary waits for the hub to hand out
// a new epoch), the epoch it acknowledges (a planned move waits for the old primary's) or the
// version it runs (a version roll moves to the next share on it), or its clocks (a primary on a
// cluster whose clocks disagree moves off it). In a
// 10,000-database run, fenced primaries whose reports waited at the default priority behind
// thousands of other databases kept 976 databases not Available for minutes after their agents
// had recovered.
func urgentReport(old, cur client.Object) bool {
	o, okOld := old.(*dbfleetv1alpha1.MemberDatabase)
	c, okCur := cur.(*dbfleetv1alpha1.MemberDatabase)
	if !okOld || !okCur {
		return false
	}
	flipped := func(condition string) bool {
		return meta.IsStatusConditionTrue(o.Status.Conditions, condition) != meta.IsStatusConditionTrue(c.Status.Conditions, condition)
	}
	// A share moving from one epoch it acted on to another is a demotion (or re-promotion) the hub
	// waits for; a new share's first epoch (from 0) is only its first report.
	acked := o.Status.Epoch != 0 && o.Status.Epoch != c.Status.Epoch
	return flipped(dbfleetv1alpha1.ConditionAvailable) || flipped(dbfleetv1alpha1.ConditionFenced) || flipped(dbfleetv1alpha1.ConditionClockSkew) || acked ||
		readWrite(o) != readWrite(c) || finalLSNs(o) != finalLSNs(c) || o.Status.Version != c.Status.Version
}

// handoverReport says a report carries what a primary handover waits on and nothing else can
// come with: a demoted primary's final LSN (the switchover promotes the target on it) or a new
// read-write endpoint (the other clusters' standbys follow it). It is reconciled at once, not
// batched: a switchover's write gap waited reportBatch on each. They come once per handover, so
// at 1,000 clusters there is nothing to gain from batching them.
func handoverReport(old, cur client.Object) bool {
	o, okOld := old.(*dbfleetv1alpha1.MemberDatabase)
	c, okCur := cur.(*dbfleetv1alpha1.MemberDatabase)
	return okOld && okCur && (finalLSNs(o) != finalLSNs(c) || (readWrite(c) != "" && readWrite(o) != readWrite(c)))
}

// finalLSNs are the final LSNs a share's demoted instances report: a planned switchover waits
// for the old primary's before it promotes the target.
func finalLSNs(mdb *dbfleetv1alpha1.MemberDatabase) string {
	var b strings.Builder
	for _, in := range mdb.Status.Instances {
		if d := in.Demoted; d != nil {
			fmt.Fprintf(&b, "%s@%d=%s;", in.Pod, d.Epoch, d.FinalLSN)
		}
	}
	return b.String()
}

// readWrite is the read-write endpoint a share reports. When a new primary's appears, the other
// shares' standbys must be told to follow it: with synchronous replication the new primary's
// commits wait for them, and the share cannot report Available (an urgent report) before that.
func readWrite(mdb *dbfleetv1alpha1.MemberDatabase) string {
	if mdb.Status.Endpoints == nil {
		return ""
	}
	return mdb.Status.Endpoints.ReadWrite
}

func databaseOfMember(obj client.Object) []reconcile.Request {
	mdb, ok := obj.(*dbfleetv1alpha1.MemberDatabase)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{
		Namespace: mdb.Spec.DatabaseRef.Namespace, Name: mdb.Spec.DatabaseRef.Name,
	}}}
}

func (r *Reconciler) databasesInNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.databases(ctx, client.InNamespace(obj.GetNamespace()))
}

func (r *Reconciler) allDatabases(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.databases(ctx)
}

func (r *Reconciler) databases(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &dbfleetv1alpha1.DatabaseClusterList{}
	// Only names are read: no need to copy 10,000 databases out of the cache.
	if err := r.Client.List(ctx, list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List DatabaseClusters to re-evaluate")
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}
