package member

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// FieldOwner is the server-side apply field manager of everything the agent writes.
const FieldOwner = client.FieldOwner("dbfleet-agent")

// Reconciler applies MemberDatabases from the hub (the manager's local cluster) into the engaged
// member cluster each one names.
type Reconciler struct {
	Manager mcmanager.Manager
	// Guard is the agent's hub-lease freshness. Nil in the hub (Push mode), which is itself the
	// authority and fences nothing.
	Guard *fence.Guard
	// Recorder records Events on MemberDatabases, on the hub; nil records none.
	Recorder events.EventRecorder
	// InstanceImage is the image carrying /dbfleet-instance (the agent's --instance-image). Empty:
	// postgres pods run their image as it is, and the client Services select on role labels alone.
	InstanceImage string
	// HTTPClient reads the instances' /status; nil uses http.DefaultClient.
	HTTPClient *http.Client

	// shares is what the agent remembers of each share between passes, one record a share.
	shares shareStates
	// reported is the status of each share's last report, for a cache not yet showing it. It
	// stays apart from shares: ownwrites.Tracker, which the hub's controllers use too, is the
	// one place that compares resource versions; forget drops both.
	reported reports
}

// forget drops everything the agent remembers of a share that is going away.
func (r *Reconciler) forget(key shareKey) {
	r.shares.forget(key)
	r.reported.forget(key.NamespacedName)
}

// now is the agent's clock (the guard's): the one its Lease renewals are written with, so the one
// a lapse is judged and an instance's clock compared on. The hub (no guard) uses the system's.
func (r *Reconciler) now() time.Time {
	if r.Guard != nil {
		return r.Guard.Now()
	}
	return time.Now()
}

// firstReportHold is how long a new share's first report may wait for its StatefulSet to become
// ready, so that one status write says both "applied" and "ready" (see holdFirstReport).
const firstReportHold = 3 * time.Second

// fullPassEvery bounds how long a live primary share goes on lease renewals alone: a full pass
// re-applies its Service and PodDisruptionBudgets, which nothing watches for drift.
const fullPassEvery = time.Minute

// conflictError says an object the agent would manage exists but was not created by it.
type conflictError struct{ kind, key string }

func (e *conflictError) Error() string {
	return fmt.Sprintf("%s %s exists and was not created by dbfleet (no %s=%s label): refusing to touch it",
		e.kind, e.key, specs.LabelManagedBy, specs.ManagedByAgent)
}

func isConflict(err error) bool {
	var c *conflictError
	return errors.As(err, &c)
}

// retryable says whether any of errs may go away on a retry: all but conflicts, which only a
// change to the object (or the MemberDatabase) can fix.
func retryable(errs []error) bool {
	for _, err := range errs {
		if !isConflict(err) {
			return true
		}
	}
	return false
}

// instanceRecheck is how often an instance-managed share's instances are read again;
// instanceSettleRecheck while the share is not Available.
const (
	instanceRecheck       = 5 * time.Second
	instanceSettleRecheck = time.Second
	// instanceHandoverRecheck: while a primary handover is under way (handingOver).
	instanceHandoverRecheck = 200 * time.Millisecond
)

// instanceManaged says the share's pods run the instance manager, whose /status each full pass
// reads (so a live primary share never takes the renewal-only pass).
func (r *Reconciler) instanceManaged(mdb *dbfleetv1alpha1.MemberDatabase) bool {
	return r.InstanceImage != "" && mdb.Spec.Database.Engine == dbfleetv1alpha1.EnginePostgres
}

// replaceWait is how soon a share whose StatefulSet is being replaced is looked at again, should
// the old one's deletion event be missed.
const replaceWait = 5 * time.Second

// event records an Event on the MemberDatabase, on the hub, when the reconciler has a recorder.
func (r *Reconciler) event(mdb *dbfleetv1alpha1.MemberDatabase, eventType, reason, action, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(mdb, nil, eventType, reason, action, note, args...)
	}
}

// announce records an Event when the share's volumes start keeping a size other than the one it
// asks for, the first pass that finds it: the condition says so for as long as it lasts.
func (r *Reconciler) announce(before, mdb *dbfleetv1alpha1.MemberDatabase) {
	now := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionApplied)
	if now == nil || (now.Reason != dbfleetv1alpha1.ReasonStorageNotExpandable && now.Reason != dbfleetv1alpha1.ReasonStorageSizeKept) {
		return
	}
	if was := meta.FindStatusCondition(before.Status.Conditions, dbfleetv1alpha1.ConditionApplied); was != nil && was.Reason == now.Reason && was.Message == now.Message {
		return
	}
	r.event(mdb, corev1.EventTypeWarning, now.Reason, "ResizeStorage", "%s", now.Message)
}

// Reconcile implements mcreconcile.Reconciler: it finds the share and its member cluster, cleans
// up a share being deleted, and otherwise runs a renewal-only pass when that is all a live primary
// needs, or a full pass (reconcileShare).
func (r *Reconciler) Reconcile(ctx context.Context, req mcreconcile.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", req.ClusterName, "namespace", req.Namespace, "name", req.Name)
	ctx = ctrl.LoggerInto(ctx, log)

	hub := r.Manager.GetLocalManager().GetClient()
	key := shareKey{cluster: req.ClusterName, NamespacedName: req.NamespacedName}
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	if err := hub.Get(ctx, req.NamespacedName, mdb); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key) // gone, perhaps without the agent seeing it go (its finalizer removed by hand)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if mdb.Labels[dbfleetv1alpha1.LabelCluster] != req.ClusterName || mdb.Namespace != dbfleetv1alpha1.MemberNamespace(req.ClusterName) {
		return ctrl.Result{}, nil // not this cluster's share
	}
	cl, err := r.Manager.GetCluster(ctx, req.ClusterName)
	if errors.Is(err, multicluster.ErrClusterNotFound) {
		return r.notEngaged(ctx, hub, req.ClusterName)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if !mdb.DeletionTimestamp.IsZero() {
		r.forget(key)
		return ctrl.Result{}, r.cleanup(ctx, hub, cl.GetClient(), mdb, req.ClusterName)
	}
	if mdb, err = ensureFinalizer(ctx, hub, mdb); err != nil {
		return ctrl.Result{}, err
	}
	share := r.shares.get(key)
	if res, ok := r.renewOnly(ctx, cl.GetClient(), mdb, share, req.ClusterName); ok {
		return res, nil
	}
	share.lastPass = nil
	return r.reconcileShare(ctx, hub, cl, mdb, share, req.ClusterName)
}

// ensureFinalizer adds the agent's finalizer, by which the hub learns that the share's objects
// are gone, to a MemberDatabase that lacks it, and returns the MemberDatabase as patched.
func ensureFinalizer(ctx context.Context, hub client.Client, mdb *dbfleetv1alpha1.MemberDatabase) (*dbfleetv1alpha1.MemberDatabase, error) {
	if controllerutil.ContainsFinalizer(mdb, dbfleetv1alpha1.MemberDatabaseFinalizer) {
		return mdb, nil
	}
	patched := mdb.DeepCopy()
	controllerutil.AddFinalizer(patched, dbfleetv1alpha1.MemberDatabaseFinalizer)
	if err := hub.Patch(ctx, patched, client.MergeFrom(mdb)); err != nil {
		return mdb, fmt.Errorf("add finalizer: %w", err)
	}
	return patched, nil
}

// reconcileShare is a full pass over a share: it judges its fence, applies its objects, reports
// its status and says when to come back.
func (r *Reconciler) reconcileShare(ctx context.Context, hub client.Client, cl cluster.Cluster, mdb *dbfleetv1alpha1.MemberDatabase,
	share *shareState, clusterName string) (ctrl.Result, error) {
	member := cl.GetClient()
	r.reported.catchUp(mdb)
	before := mdb.DeepCopy()
	running, f, err := r.judgeFence(ctx, member, mdb, share)
	if err != nil {
		return ctrl.Result{}, err
	}
	if running > mdb.Spec.Epoch {
		// A stale epoch is never acted on: this member already runs a newer one.
		setStale(mdb, running)
		return ctrl.Result{}, r.writeStatus(ctx, hub, before, mdb)
	}
	pass := r.applyShare(ctx, member, cl.GetAPIReader(), mdb, share, f.fencedAt, clusterName)
	lapseWait := r.settleFence(ctx, mdb, share, &f, &pass)
	applyErr := pass.err()
	setStatus(mdb, pass, f.fenced)
	r.announce(before, mdb)
	if wait := r.holdFirstReport(share, before, mdb, applyErr != nil || f.fenced || pass.storage != nil, time.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	statusErr := r.writeStatus(ctx, hub, before, mdb)
	livePrimary := mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && !f.fenced && r.Guard != nil
	next := r.nextPass(mdb, pass, livePrimary, lapseWait)
	switch err := errors.Join(applyErr, statusErr); {
	case err != nil && livePrimary:
		// The primary Lease must be carried forward on time whatever else failed: come back
		// when it needs it, not after the error backoff, which grows to minutes.
		ctrl.LoggerFrom(ctx).Error(err, "Share not fully applied or reported; retrying with the next primary Lease renewal")
		return ctrl.Result{RequeueAfter: next}, nil
	case statusErr != nil || retryable(pass.errs):
		return ctrl.Result{}, err
	case applyErr != nil:
		return ctrl.Result{}, nil // a conflict, reported: retrying cannot fix it, a change to the object will
	}
	if livePrimary && !pass.replacing && pass.storage == nil {
		share.lastPass = &passRecord{mdbResourceVersion: mdb.ResourceVersion, stsResourceVersion: pass.sts.ResourceVersion, at: time.Now()}
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// fenceState is where a share's primary stands in one pass.
type fenceState struct {
	// fencedAt is the epoch at which the share's primary is fenced, 0 when it is not.
	fencedAt int64
	// fenced says the share holds the primary and it is fenced.
	fenced bool
	// now: this pass fences it. lapsedHere: the agent judged its primary Lease lapsed at this
	// epoch in an earlier pass.
	now, lapsedHere bool
}

// judgeFence reads, from the StatefulSet the member runs, the epoch it runs and the one its
// primary was fenced at, and fences a primary share whose agent has no fresh hub renewal or whose
// primary Lease lapsed at this epoch. A fence from an epoch below the share's is spent.
func (r *Reconciler) judgeFence(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState) (int64, fenceState, error) {
	running, fencedAt, err := currentEpochs(ctx, member, mdb)
	if err != nil || running > mdb.Spec.Epoch {
		return running, fenceState{}, err
	}
	if fencedAt < mdb.Spec.Epoch {
		fencedAt = 0 // the hub has since handed out a higher epoch: the old fence is spent
	}
	primary := mdb.Spec.Role == dbfleetv1alpha1.RolePrimary
	f := fenceState{fencedAt: fencedAt, lapsedHere: share.lapsed == mdb.Spec.Epoch}
	f.now = primary && fencedAt == 0 && r.Guard != nil && (!r.Guard.Fresh() || f.lapsedHere)
	if f.now {
		f.fencedAt = mdb.Spec.Epoch
		log := ctrl.LoggerFrom(ctx)
		if f.lapsedHere {
			log.Info("Fencing primary: its primary Lease lapsed while the member API server was unreachable", "epoch", f.fencedAt)
		} else {
			log.Info("Fencing primary: no successful hub renewal within fenceAfter", "epoch", f.fencedAt, "deadline", r.Guard.Deadline())
		}
	}
	f.fenced = primary && f.fencedAt > 0
	return running, f, nil
}

// settleFence runs after the share's objects were applied. A live primary whose Lease renewal
// failed is fenced once the Lease has certainly lapsed (judgeLeaseLapse), and the Fenced message
// says why; a fence this pass wrote is counted once. It returns when to judge the lapse again.
func (r *Reconciler) settleFence(ctx context.Context, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, f *fenceState, pass *passResult) time.Duration {
	primary := mdb.Spec.Role == dbfleetv1alpha1.RolePrimary
	var lapseWait time.Duration
	if primary && !f.fenced && pass.leaseErr != nil && r.Guard != nil {
		var lapsedNow bool
		if lapsedNow, lapseWait = r.judgeLeaseLapse(ctx, share, mdb, pass.leaseErr, r.now()); lapsedNow {
			f.fenced, f.fencedAt = true, mdb.Spec.Epoch
			pass.fenceMessage = lapseMessage(mdb.Spec.Epoch, pass.leaseErr)
		}
	} else if f.lapsedHere && f.fenced {
		pass.fenceMessage = lapseMessage(mdb.Spec.Epoch, errors.New("the member API server did not answer"))
	}
	if f.now && pass.atEpoch && !pass.replacing && share.fenceCounted != f.fencedAt {
		// Counted once: the StatefulSet now carries the fenced epoch.
		share.fenceCounted = f.fencedAt
		primariesFenced.Inc()
	}
	return lapseWait
}

// nextPass is when to look at the share again: for a live primary, in time to carry the next hub
// renewal into its Lease (nextLook); sooner to judge a lapse, to see a replaced StatefulSet, or to
// read the instances again, which nothing watches.
func (r *Reconciler) nextPass(mdb *dbfleetv1alpha1.MemberDatabase, pass passResult, livePrimary bool, lapseWait time.Duration) time.Duration {
	next := r.nextLook(livePrimary)
	if lapseWait > 0 && (next == 0 || next > lapseWait) {
		next = lapseWait // judge the lapse on time
	}
	if pass.replacing && (next == 0 || next > replaceWait) {
		// The old StatefulSet's deletion brings the share back; look again in case it is slow.
		next = replaceWait
	}
	if pass.instanceManaged && (next == 0 || next > instanceRecheck) {
		// Nothing watches an instance's /status: look again to keep the report and the
		// instance-role labels (which the client Services select on) current.
		next = instanceRecheck
		if !meta.IsStatusConditionTrue(mdb.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) {
			// On the way somewhere (a promotion, a standby re-pointed): the new primary's
			// endpoint, which the other clusters' standbys wait for, is reported a second
			// after it runs, not up to five.
			next = instanceSettleRecheck
		}
		if handingOver(mdb, pass.instances) {
			next = instanceHandoverRecheck
		}
	}
	return next
}

// renewOnly is the pass of a live primary share whose MemberDatabase and StatefulSet have not
// changed since its last full pass, less than fullPassEvery ago: it keeps the pods' role labels
// and carries the last hub renewal into the primary Lease, and applies nothing. A share re-applied
// its four objects every fenceAfter/5 before, which at 30 primaries was 40 member API requests a
// second for no change. It reports whether it handled the pass.
func (r *Reconciler) renewOnly(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, cluster string) (ctrl.Result, bool) {
	if r.Guard == nil || mdb.Spec.Role != dbfleetv1alpha1.RolePrimary || !r.Guard.Fresh() || r.instanceManaged(mdb) {
		return ctrl.Result{}, false
	}
	last := share.lastPass
	if last == nil {
		return ctrl.Result{}, false
	}
	if last.mdbResourceVersion != mdb.ResourceVersion || time.Since(last.at) > fullPassEvery {
		return ctrl.Result{}, false
	}
	sts := &appsv1.StatefulSet{}
	if err := member.Get(ctx, client.ObjectKey{Namespace: mdb.Spec.DatabaseRef.Namespace, Name: mdb.Spec.DatabaseRef.Name}, sts); err != nil ||
		sts.ResourceVersion != last.stsResourceVersion {
		return ctrl.Result{}, false
	}
	// A pod that cannot get its image changes nothing of the StatefulSet: the full pass reports it.
	if problems, err := labelPods(ctx, member, mdb, false); err != nil || len(problems) > 0 {
		return ctrl.Result{}, false
	}
	if err := r.renewPrimaryLease(ctx, member, mdb, share, cluster); err != nil {
		return ctrl.Result{}, false
	}
	return ctrl.Result{RequeueAfter: r.nextLook(true)}, true
}

// holdFirstReport says how long to hold a new share's first report: one that would only say
// "applied, not ready yet" waits up to firstReportHold after the agent first applied the share, in
// case the StatefulSet becomes ready by then and one write says both. At 10,000 databases the
// intermediate report was one MemberDatabase status write in three, and a DatabaseCluster status
// write besides. Nothing waits on it: the hub acts on availability, fencing and the
// acknowledgement of a later epoch, which are never held, nor is a failed apply (urgent says so).
func (r *Reconciler) holdFirstReport(share *shareState, before, mdb *dbfleetv1alpha1.MemberDatabase, urgent bool, now time.Time) time.Duration {
	first := before.Status.ObservedGeneration == 0 && len(before.Status.Conditions) == 0
	if !first || urgent || meta.IsStatusConditionTrue(mdb.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) {
		share.unreportedSince = time.Time{}
		return 0
	}
	if share.unreportedSince.IsZero() {
		share.unreportedSince = now
	}
	if wait := firstReportHold - now.Sub(share.unreportedSince); wait > 0 {
		return wait
	}
	share.unreportedSince = time.Time{}
	return 0
}

// writeStatus reports the share's status to the hub when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, hub client.Client, before, mdb *dbfleetv1alpha1.MemberDatabase) error {
	if equality.Semantic.DeepEqual(before.Status, mdb.Status) {
		return nil
	}
	if err := hub.Status().Patch(ctx, mdb, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("report status: %w", err)
	}
	r.reported.wrote(mdb)
	return nil
}

// nextLook schedules the next reconcile of a live primary share. The primary Lease it just
// wrote expires at the fence deadline; the share comes back one heartbeat after the renewal it
// carries (lookAfter: 5 s at the defaults, with 10 s of the Lease left), by when the agent has
// renewed again, and carries the latest renewal into the Lease, so the instance manager always
// sees a Lease with most of fenceAfter left. Without a newer renewal by then, it comes back at
// the deadline itself, to fence. A look every fenceAfter/5 (3 s) made five looks for every three
// renewals: at 10,000 primaries in one bench-scale process, the largest share of its CPU that
// grew with databases at rest; one look per renewal is the least that keeps the Lease fresh.
func (r *Reconciler) nextLook(livePrimary bool) time.Duration {
	if !livePrimary || r.Guard == nil {
		return 0
	}
	return lookAfter(time.Until(r.Guard.Deadline()), r.Guard.FenceAfter(), r.Guard.RenewInterval())
}

// leaseInHand is how much of the primary Lease nextLook keeps left when it rewrites it, at least:
// the instance manager stops writes contract.FenceSafety before the Lease ends, starts its fast
// shutdown a moment before that, and reads the Lease every second or so, and a busy member API
// server can take a second or two. A third of a short fenceAfter (2.7 s of 8 s) was less than
// that, and healthy primaries on real nodes fenced themselves.
const leaseInHand = contract.FenceSafety + 3*time.Second

// lookAfter is nextLook's arithmetic: until is the time left to the fence deadline, renewEvery
// the heartbeat interval (0 when unknown). The Lease is rewritten when keep is left of it: a
// third of fenceAfter, leaseInHand where fenceAfter leaves room for it, and with the heartbeat
// known, as soon as the next renewal can have happened (fenceAfter - renewEvery). Without a newer
// renewal by then, the share comes back at the deadline itself, to fence.
func lookAfter(until, fenceAfter, renewEvery time.Duration) time.Duration {
	keep := max(fenceAfter/3, min(leaseInHand, fenceAfter*2/3))
	if renewEvery > 0 && renewEvery < fenceAfter {
		keep = max(keep, fenceAfter-renewEvery)
	}
	next := until - keep
	if next <= 0 {
		next = until
	}
	return max(next, 100*time.Millisecond)
}

// renewPrimaryLease carries the last successful hub renewal into the share's member-local primary
// Lease, once the agent has renewed at all since it started.
func (r *Reconciler) renewPrimaryLease(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, cluster string) error {
	renewed := r.Guard.LastRenewStart()
	if renewed.IsZero() {
		return nil
	}
	err := fence.RenewPrimaryLease(ctx, member, mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name,
		contract.Holder(cluster, mdb.Spec.Epoch), renewed, r.Guard.FenceAfter(), specs.ObjectLabels(mdb))
	// Recorded unless the write certainly never reached the API server (connection refused): a
	// write that failed otherwise (a timeout) may have landed, and the Lease may say renewed.
	if tried := share.leaseTried; !utilnet.IsConnectionRefused(err) && (tried.epoch != mdb.Spec.Epoch || renewed.After(tried.renewed)) {
		share.leaseTried = leaseTry{epoch: mdb.Spec.Epoch, renewed: renewed}
	}
	return err
}

// currentEpochs reads, from the StatefulSet the member runs, the epoch it was last applied at and
// the epoch its primary was fenced at (zero when none).
func currentEpochs(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase) (running, fencedAt int64, err error) {
	sts := &appsv1.StatefulSet{}
	err = member.Get(ctx, client.ObjectKey{Namespace: mdb.Spec.DatabaseRef.Namespace, Name: mdb.Spec.DatabaseRef.Name}, sts)
	if apierrors.IsNotFound(err) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read StatefulSet: %w", err)
	}
	if sts.Labels[specs.LabelManagedBy] != specs.ManagedByAgent {
		return 0, 0, nil // not ours; apply reports the conflict
	}
	running, _ = strconv.ParseInt(sts.Labels[dbfleetv1alpha1.LabelEpoch], 10, 64)
	fencedAt, _ = strconv.ParseInt(sts.Annotations[specs.AnnotationFencedEpoch], 10, 64)
	return running, fencedAt, nil
}

// engageWait is how soon a share of a Push cluster whose kubeconfig is not engaged yet is retried.
const engageWait = 2 * time.Second

// notEngaged handles a share of a cluster this process does not serve. A Pull cluster's share
// belongs to its agent: leave it. A Push cluster's share is the hub's, but its kubeconfig Secret
// may not be engaged yet (the provider engages clusters asynchronously): look again shortly
// rather than miss it, since nothing else would bring the share back.
func (r *Reconciler) notEngaged(ctx context.Context, hub client.Client, cluster string) (ctrl.Result, error) {
	mc := &dbfleetv1alpha1.MemberCluster{}
	if err := hub.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if mc.Spec.SyncMode != dbfleetv1alpha1.SyncPush {
		return ctrl.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Push cluster not engaged yet")
	return ctrl.Result{RequeueAfter: engageWait}, nil
}

// cleanup removes the share's objects from the member cluster, then lets the MemberDatabase go
// by dropping the agent's finalizer: that is the hub's confirmation. Volumes follow the
// StatefulSet's retention policy (kept unless the user asked for Delete).
func (r *Reconciler) cleanup(ctx context.Context, hub, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, cluster string) error {
	ns, name := mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name
	for _, obj := range specs.ShareObjects(ns, name) {
		if err := deleteOwned(ctx, member, obj); err != nil {
			return err
		}
	}
	// ClusterSetIP mode exported the share's Services to the clusterset: the exports go too, or
	// other clusters would go on resolving a name for a database this cluster no longer runs. A
	// member without the MCS API has none.
	for _, svc := range []string{specs.ReadWriteServiceName(name), specs.ReadOnlyServiceName(name)} {
		if err := ensureServiceExport(ctx, member, mdb, svc, false); err != nil && !errors.Is(err, errNoMCS) {
			return err
		}
	}
	// Whatever epoch it names, this cluster's primary Lease goes with the share: a database
	// re-created under the same name must not find a stale but unexpired Lease here.
	if err := fence.ReleasePrimaryLease(ctx, member, ns, name, cluster, math.MaxInt64); err != nil {
		return err
	}
	if controllerutil.ContainsFinalizer(mdb, dbfleetv1alpha1.MemberDatabaseFinalizer) {
		patched := mdb.DeepCopy()
		controllerutil.RemoveFinalizer(patched, dbfleetv1alpha1.MemberDatabaseFinalizer)
		if err := hub.Patch(ctx, patched, client.MergeFrom(mdb)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove finalizer: %w", err)
		}
	}
	ctrl.LoggerFrom(ctx).Info("Removed share from member cluster")
	return nil
}

// primaryLeaseLapse is when the share's primary Lease at epoch has certainly run out for its
// instances, by this agent's record of the renewals it tried: the latest (a write that failed
// but may have landed counts), plus the Lease's duration, plus the clock skew the instances allow
// between their clock and the agent's (they fence fenceSafety before that, on their own
// clock). ok is false when this agent tried no renewal at that epoch: an earlier agent process
// may have, and it cannot tell when.
func (r *Reconciler) primaryLeaseLapse(share *shareState, epoch int64) (lapse time.Time, ok bool) {
	tried := share.leaseTried
	if tried.epoch != epoch {
		return time.Time{}, false
	}
	return tried.renewed.Add(time.Duration(fence.SecondsDown(r.Guard.FenceAfter()))*time.Second + contract.MaxClockSkew), true
}

// judgeLeaseLapse runs after a live primary share's pass whose primary Lease renewal failed (the
// member API server stopped, say). The instances stop taking writes when the Lease runs out,
// whatever the agent does; but the agent still heartbeats the hub, which therefore sees no
// silence to wait out and would never promote elsewhere. Once the Lease has certainly lapsed,
// the agent fences the share at its epoch for good and says so (Fenced=True,
// PrimaryLeaseLapsed), which lets the hub promote another cluster at once. It returns whether it
// did, and otherwise when to look again.
func (r *Reconciler) judgeLeaseLapse(ctx context.Context, share *shareState, mdb *dbfleetv1alpha1.MemberDatabase, renewErr error, now time.Time) (bool, time.Duration) {
	lapse, ok := r.primaryLeaseLapse(share, mdb.Spec.Epoch)
	if !ok {
		return false, 0
	}
	if wait := lapse.Sub(now); wait > 0 {
		return false, wait
	}
	if share.lapsed != mdb.Spec.Epoch {
		share.lapsed = mdb.Spec.Epoch
		ctrl.LoggerFrom(ctx).Error(renewErr, "The primary Lease could not be renewed and has lapsed: the primary has stopped taking writes; fencing the share",
			"epoch", mdb.Spec.Epoch, "lapse", lapse)
	}
	return true, 0
}

// lapseMessage is the Fenced condition's message for a share fenced by judgeLeaseLapse.
func lapseMessage(epoch int64, renewErr error) string {
	return fmt.Sprintf("the agent could not renew the primary Lease at epoch %d (%v) and it has run out: the primary has stopped taking writes; the share stays fenced until the hub hands out a higher epoch", epoch, renewErr)
}
