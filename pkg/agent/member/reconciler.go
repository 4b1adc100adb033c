package member

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// PrimaryLostAfter is how long a live primary's instance may stop serving before the agent
	// counts its pod lost (watchPrimary); zero never does.
	PrimaryLostAfter time.Duration

	// shares is what the agent remembers of each share between passes, one record a share.
	shares shareStates
	// reported is the status of each share's last report, for a cache not yet showing it. It
	// stays apart from shares: ownwrites.Tracker, which the hub's controllers use too, is the
	// one place that compares resource versions; forget drops both.
	reported reports
	// statusClients read the instances' /status over HTTPS, one client a share.
	statusClients statusClients
}

// forget drops everything the agent remembers of a share that is going away.
func (r *Reconciler) forget(key shareKey) {
	r.shares.forget(key)
	r.reported.forget(key.NamespacedName)
	r.statusClients.forget(key)
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
	if why := dbfleetv1alpha1.ReservedMemberNamespace(mdb.Spec.DatabaseRef.Namespace); why != "" {
		return ctrl.Result{}, r.refuseShare(ctx, hub, mdb, why)
	}
	share := r.shares.get(key)
	if res, ok := r.renewOnly(ctx, hub, cl.GetClient(), mdb, share, req.ClusterName); ok {
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
	livePrimary := mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && !f.fenced && r.Guard != nil && running <= mdb.Spec.Epoch
	if !livePrimary {
		// Before anything of a fence, a demotion or a stale epoch is written: from here on the
		// renewer renews nothing of the share's, and no renewal of its is still in flight.
		share.lease.stop()
	}
	if running > mdb.Spec.Epoch {
		// A stale epoch is never acted on: this member already runs a newer one.
		setStale(mdb, running)
		return ctrl.Result{}, r.writeStatus(ctx, hub, before, mdb)
	}
	pass := r.applyShare(ctx, hub, member, cl.GetAPIReader(), mdb, share, f.fencedAt, clusterName)
	lapseWait := r.settleFence(ctx, member, mdb, share, &f, &pass)
	applyErr := pass.err()
	setStatus(mdb, pass, f.fenced)
	r.announce(before, mdb)
	if wait := r.holdFirstReport(share, before, mdb, applyErr != nil || f.fenced || pass.storage != nil, time.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	statusErr := r.writeStatus(ctx, hub, before, mdb)
	livePrimary = livePrimary && !f.fenced // settleFence may have fenced it for a lapse
	next := r.nextPass(mdb, pass, livePrimary, lapseWait)
	if f.failsafe && next < failsafeRecheck {
		next = failsafeRecheck // not every 100 ms past the deadline: each look reads the instance
	}
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

// refuseShare reports a share in a namespace that may hold no database as not applied, and
// applies nothing: the hub should never have placed it (it refuses such DatabaseClusters), and
// the admission policy bound to the agent's ServiceAccount would refuse its objects anyway.
func (r *Reconciler) refuseShare(ctx context.Context, hub client.Client, mdb *dbfleetv1alpha1.MemberDatabase, why string) error {
	before := mdb.DeepCopy()
	msg := fmt.Sprintf("nothing applied: namespace %s may hold no database (%s)", mdb.Spec.DatabaseRef.Namespace, why)
	if c := meta.FindStatusCondition(mdb.Status.Conditions, dbfleetv1alpha1.ConditionApplied); c == nil || c.Reason != dbfleetv1alpha1.ReasonReservedNamespace {
		r.event(mdb, corev1.EventTypeWarning, dbfleetv1alpha1.ReasonReservedNamespace, "Apply", "%s", msg)
	}
	setCondition(mdb, dbfleetv1alpha1.ConditionApplied, metav1.ConditionFalse, dbfleetv1alpha1.ReasonReservedNamespace, msg)
	return r.writeStatus(ctx, hub, before, mdb)
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
