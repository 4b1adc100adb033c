package clusterhealth

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/heartbeat"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
	"github.com/dbfleet/dbfleet/pkg/ownwrites"
)

// Name is the controller's name in the hub's --controllers list.
const Name = "clusterhealth"

// Reasons the hub sets.
const (
	ReasonAgentLeaseExpired = "AgentLeaseExpired"
	ReasonLeaseRenewed      = "LeaseRenewed"
)

// Reconciler judges MemberCluster health from Lease renewals.
type Reconciler struct {
	Client      client.Client
	Recorder    events.EventRecorder
	Clock       clock.PassiveClock
	GracePeriod time.Duration
	// StatusInterval bounds how stale status.lastHeartbeat may get (zero: half the grace period).
	StatusInterval time.Duration
	// Observer is shared with the failover gate of the databasecluster controller.
	Observer *liveness.Observer

	// written is the resourceVersion of the controller's last write of each MemberCluster: a
	// reconcile woken (by the agent's Lease or report) before the cache has that write waits for
	// it, rather than patch against the older copy and be refused with a conflict. At 1,000
	// joining clusters that was 461 refused patches (and as many error logs).
	written ownwrites.Tracker
}

// staleRecheck is when a reconcile put off for a stale cache looks again, should the watch event
// of the controller's own write not bring it back first.
const staleRecheck = time.Second

// +kubebuilder:rbac:groups=dbfleet.io,resources=memberclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=dbfleet.io,resources=memberclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch
// +kubebuilder:rbac:groups=dbfleet.io,resources=memberclusterreports,verbs=get;list;watch

// Setup registers the controller.
func Setup(_ context.Context, mgr ctrl.Manager, cfg hub.Config) error {
	r := &Reconciler{
		Client:         mgr.GetClient(),
		Recorder:       mgr.GetEventRecorder("dbfleet-hub"),
		Clock:          clock.RealClock{},
		GracePeriod:    cfg.ClusterGracePeriod,
		StatusInterval: cfg.HeartbeatStatusInterval,
		Observer:       cfg.Liveness,
	}
	return r.SetupWithManager(mgr)
}

// SetupWithManager watches MemberClusters, the agents' Leases and their reports.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Observer == nil {
		r.Observer = liveness.NewObserver(r.Clock)
	}
	r.Observer.SetReader(ReadRenewTime(mgr.GetAPIReader()))
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&dbfleetv1alpha1.MemberCluster{}).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.observeLease)).
		Watches(&dbfleetv1alpha1.MemberClusterReport{}, handler.EnqueueRequestsFromMapFunc(reportCluster)).
		Complete(r)
}

// observeLease records an agent Lease's renewal the moment the hub's watch delivers it and maps
// the Lease to its MemberCluster. Observing here rather than in Reconcile keeps the health
// judgement independent of the work queue: at 1,000 clusters the reconciles that write status
// can lag the renewals by seconds, and a renewal that waits in the queue must not count as
// silence.
func (r *Reconciler) observeLease(_ context.Context, obj client.Object) []reconcile.Request {
	cluster := leaseCluster(obj)
	if cluster == "" {
		return nil
	}
	if lease, ok := obj.(*coordinationv1.Lease); ok && lease.Spec.RenewTime != nil {
		r.Observer.Observe(cluster, lease.Spec.RenewTime.Time)
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: cluster}}}
}

// ReadRenewTime reads a cluster's agent Lease with reader, which should bypass the cache (the
// manager's APIReader): it confirms a silence the hub is about to act on.
func ReadRenewTime(reader client.Reader) liveness.RenewReader {
	return func(ctx context.Context, cluster string) (time.Time, bool, error) {
		lease := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: heartbeat.LeaseName}
		if err := reader.Get(ctx, key, lease); err != nil {
			if apierrors.IsNotFound(err) {
				return time.Time{}, false, nil
			}
			return time.Time{}, false, err
		}
		if lease.Spec.RenewTime == nil {
			return time.Time{}, false, nil
		}
		return lease.Spec.RenewTime.Time, true, nil
	}
}

// reportCluster maps an agent's MemberClusterReport to its MemberCluster: the report named after
// the cluster in the cluster's own namespace, and no other.
func reportCluster(_ context.Context, obj client.Object) []reconcile.Request {
	if obj.GetNamespace() != dbfleetv1alpha1.MemberNamespace(obj.GetName()) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: obj.GetName()}}}
}

// leaseCluster is the MemberCluster an agent Lease belongs to, or "" for any other Lease.
func leaseCluster(obj client.Object) string {
	cluster := obj.GetLabels()[dbfleetv1alpha1.LabelCluster]
	if obj.GetName() != heartbeat.LeaseName || cluster == "" || obj.GetNamespace() != dbfleetv1alpha1.MemberNamespace(cluster) {
		return ""
	}
	return cluster
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("MemberCluster", req.Name)
	mc := &dbfleetv1alpha1.MemberCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, mc); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.Observer.Forget(req.Name)
			r.written.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.written.Behind(req.NamespacedName, mc.ResourceVersion) {
		return ctrl.Result{RequeueAfter: staleRecheck}, nil
	}

	// Renewals are observed as the Lease watch delivers them (observeLease), the initial list
	// included, so the reconcile reads the Observer. A silence of half the grace period (two
	// missed heartbeats at the defaults) is checked with a read of the Lease, since the watch may
	// be behind: a renewal found that way counts from the read, so reading early keeps that error
	// small (a read only at the grace period, after a watch 8 s behind, marked a lost cluster
	// 32 s after its last renewal instead of 20). The judgement at the grace period reads again.
	r.Observer.Known(mc.Name)
	silent, err := r.Observer.ConfirmedSilentFor(ctx, mc.Name, r.suspectAfter())
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()

	before := mc.DeepCopy()
	expired := silent > r.GracePeriod
	if err := r.copyReport(ctx, mc, expired); err != nil {
		return ctrl.Result{}, err
	}
	if expired {
		// The message must not carry the growing silence: every reconcile would rewrite it, and
		// each rewrite is a MemberCluster event that reconciles again, a write loop for as long as
		// the cluster is down (the Event below says how long it was silent).
		msg := fmt.Sprintf("no renewal of the agent's lease observed within the grace period (%s)", r.GracePeriod)
		setCondition(mc, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown, ReasonAgentLeaseExpired, msg)
		setCondition(mc, dbfleetv1alpha1.ConditionAgentConnected, metav1.ConditionFalse, ReasonAgentLeaseExpired, msg)
	} else if !r.Observer.LastObserved(mc.Name).IsZero() {
		msg := "the agent renews its lease"
		if a := mc.Status.Agent; a != nil && a.HeartbeatIntervalSeconds > 0 {
			msg = fmt.Sprintf("the agent renews its lease every %ds", a.HeartbeatIntervalSeconds)
		}
		setCondition(mc, dbfleetv1alpha1.ConditionAgentConnected, metav1.ConditionTrue, ReasonLeaseRenewed, msg)
	}
	if last := r.Observer.LastObserved(mc.Name); !last.IsZero() {
		// The wall time of the observation, for people; written when it moved by more than
		// StatusInterval (or with another change), not on every renewal: the Lease is the
		// fine-grained signal.
		observed := now.Add(-r.Clock.Since(last)).Truncate(time.Second)
		if mc.Status.LastHeartbeat == nil || observed.Sub(mc.Status.LastHeartbeat.Time) > r.statusInterval() ||
			!equality.Semantic.DeepEqual(before.Status, mc.Status) {
			mc.Status.LastHeartbeat = &metav1.Time{Time: observed}
		}
	}
	if !equality.Semantic.DeepEqual(before.Status, mc.Status) {
		if err := r.Client.Status().Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("write MemberCluster status: %w", err)
		}
		r.written.Wrote(req.NamespacedName, mc.ResourceVersion)
		if expired && !meta.IsStatusConditionPresentAndEqual(before.Status.Conditions, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown) {
			log.Info("Cluster unreachable", "silentFor", silent)
			detectionSeconds.Observe(silent.Seconds())
			r.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, ReasonAgentLeaseExpired, "Detect",
				"no lease renewal observed for %s; cluster marked Ready=Unknown", silent.Round(time.Second))
		}
	}

	if err := r.syncTaints(ctx, mc, now); err != nil {
		return ctrl.Result{}, err
	}
	if expired {
		return ctrl.Result{}, nil // the next Lease change brings the cluster back
	}
	// Look again when the silence becomes suspect, then just after the grace period would run out.
	next := r.GracePeriod - silent
	if silent < r.suspectAfter() {
		next = r.suspectAfter() - silent
	}
	return ctrl.Result{RequeueAfter: next + time.Second/10}, nil
}

// copyReport copies the agent's MemberClusterReport into mc's status: the agent's settings, the
// member's version and capacity, and, while the lease is live, the agent's Ready condition (a
// lapsed lease makes Ready Unknown whatever the last report said). Without a report, what the
// status says is left as it is.
func (r *Reconciler) copyReport(ctx context.Context, mc *dbfleetv1alpha1.MemberCluster, expired bool) error {
	report := &dbfleetv1alpha1.MemberClusterReport{}
	key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(mc.Name), Name: mc.Name}
	if err := r.Client.Get(ctx, key, report); err != nil {
		return client.IgnoreNotFound(err)
	}
	mc.Status.Agent = report.Status.Agent
	mc.Status.KubernetesVersion = report.Status.KubernetesVersion
	mc.Status.ResourceSummary = report.Status.ResourceSummary
	if ready := meta.FindStatusCondition(report.Status.Conditions, dbfleetv1alpha1.ConditionReady); ready != nil && !expired {
		setCondition(mc, dbfleetv1alpha1.ConditionReady, ready.Status, ready.Reason, ready.Message)
	}
	return nil
}

// suspectAfter is the silence at which the hub checks its watch against the API server.
func (r *Reconciler) suspectAfter() time.Duration {
	return r.GracePeriod / 2
}

func (r *Reconciler) statusInterval() time.Duration {
	if r.StatusInterval > 0 {
		return r.StatusInterval
	}
	return r.GracePeriod / 2
}

func setCondition(mc *dbfleetv1alpha1.MemberCluster, t string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
		Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: mc.Generation,
	})
}

// syncTaints makes the health taints follow the Ready condition: unreachable while Unknown,
// not-ready while False, none while True. Each taint is both NoSchedule (no new shares) and
// NoExecute (shares leave once the policy's toleration runs out). Other taints are kept.
func (r *Reconciler) syncTaints(ctx context.Context, mc *dbfleetv1alpha1.MemberCluster, now time.Time) error {
	want := ""
	switch c := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady); {
	case c == nil:
	case c.Status == metav1.ConditionUnknown:
		want = dbfleetv1alpha1.TaintClusterUnreachable
	case c.Status == metav1.ConditionFalse:
		want = dbfleetv1alpha1.TaintClusterNotReady
	}
	var taints []corev1.Taint
	have := map[corev1.TaintEffect]bool{}
	for _, t := range mc.Spec.Taints {
		health := t.Key == dbfleetv1alpha1.TaintClusterUnreachable || t.Key == dbfleetv1alpha1.TaintClusterNotReady
		if health && t.Key != want {
			continue
		}
		if health {
			have[t.Effect] = true
		}
		taints = append(taints, t)
	}
	if want != "" {
		for _, effect := range []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute} {
			if !have[effect] {
				taints = append(taints, corev1.Taint{Key: want, Effect: effect, TimeAdded: &metav1.Time{Time: now}})
			}
		}
	}
	if equality.Semantic.DeepEqual(taints, mc.Spec.Taints) || (len(taints) == 0 && len(mc.Spec.Taints) == 0) {
		return nil
	}
	before := mc.DeepCopy()
	mc.Spec.Taints = taints
	if err := r.Client.Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update health taints: %w", err)
	}
	r.written.Wrote(client.ObjectKeyFromObject(mc), mc.ResourceVersion)
	r.Recorder.Eventf(mc, nil, corev1.EventTypeNormal, "TaintsChanged", "Taint", "health taints now %v", healthTaints(taints))
	return nil
}

func healthTaints(taints []corev1.Taint) []string {
	var out []string
	for _, t := range taints {
		if t.Key == dbfleetv1alpha1.TaintClusterUnreachable || t.Key == dbfleetv1alpha1.TaintClusterNotReady {
			out = append(out, t.Key+":"+string(t.Effect))
		}
	}
	if out == nil {
		return []string{"none"}
	}
	return out
}
