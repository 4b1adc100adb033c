package clusterhealth

import (
	"context"
	"errors"
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
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
	"github.com/dbfleet/dbfleet/pkg/ownwrites"
	"github.com/dbfleet/dbfleet/pkg/queue"
)

// Name is the controller's name in the hub's --controllers list.
const Name = "clusterhealth"

// Reconciler judges MemberCluster health: a Pull cluster's from its agent's Lease renewals, a
// Push cluster's from the hub's own probes of its API server.
type Reconciler struct {
	Client      client.Client
	Recorder    events.EventRecorder
	Clock       clock.PassiveClock
	GracePeriod time.Duration
	// StatusInterval bounds how stale status.lastHeartbeat may get (zero: half the grace period).
	StatusInterval time.Duration
	// Observer is shared with the failover gate of the databasecluster controller. It learns of
	// agent renewals and of successful probes of Push clusters alike.
	Observer *liveness.Observer
	// Prober probes Push clusters' API servers; nil: no Push cluster is ever reached.
	Prober Prober

	// written is the resourceVersion of the controller's last write of each MemberCluster: a
	// reconcile woken (by the agent's Lease or report) before the cache has that write waits for
	// it, rather than patch against the older copy and be refused with a conflict. At 1,000
	// joining clusters that was 461 refused patches (and as many error logs).
	written ownwrites.Tracker
}

// Prober probes a Push cluster's API server (push.Prober).
type Prober interface {
	Probe(ctx context.Context, cluster string) push.Reachability
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
	if cfg.PushProvider != nil {
		r.Prober = &push.Prober{Clusters: cfg.PushProvider, Timeout: r.probeInterval()}
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
		WithOptions(controller.Options{NewQueue: queue.New[reconcile.Request](mgr.GetLogger())}).
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
		key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: dbfleetv1alpha1.AgentLeaseName}
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
	if obj.GetName() != dbfleetv1alpha1.AgentLeaseName || cluster == "" || obj.GetNamespace() != dbfleetv1alpha1.MemberNamespace(cluster) {
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

	before := mc.DeepCopy()
	var j judgement
	var err error
	if mc.Spec.SyncMode == dbfleetv1alpha1.SyncPush {
		j = r.judgePush(ctx, mc)
	} else if j, err = r.judgeAgent(ctx, mc); err != nil {
		return ctrl.Result{}, err
	}
	now := r.Clock.Now()
	if last := r.Observer.LastObserved(mc.Name); !last.IsZero() && !j.awaitingRenewal {
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
		if j.expired && !meta.IsStatusConditionPresentAndEqual(before.Status.Conditions, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown) {
			log.Info("Cluster unreachable", "silentFor", j.silent, "syncMode", mc.Spec.SyncMode)
			detectionSeconds.Observe(j.silent.Seconds())
			r.Recorder.Eventf(mc, nil, corev1.EventTypeWarning, j.reason, "Detect", "%s; cluster marked Ready=Unknown", j.detail)
		}
	}

	if err := r.syncTaints(ctx, mc, now); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: j.recheck}, nil
}

// judgement is what the health reconcile of one cluster concluded.
type judgement struct {
	// silent is how long the hub has not seen the cluster alive; expired: longer than the grace period.
	silent  time.Duration
	expired bool
	// reason and detail say why, for the Event of a cluster marked Ready=Unknown.
	reason, detail string
	// recheck is when to look again (zero: only on the next watch event).
	recheck time.Duration
	// awaitingRenewal is set when the cluster stays Ready=Unknown, as an earlier hub left it,
	// until this hub sees its agent renew: what the hub observed so far is no heartbeat.
	awaitingRenewal bool
}

// judgeAgent judges a Pull cluster by its agent's Lease renewals and copies its report.
func (r *Reconciler) judgeAgent(ctx context.Context, mc *dbfleetv1alpha1.MemberCluster) (judgement, error) {
	// Renewals are observed as the Lease watch delivers them (observeLease), the initial list
	// included, so the reconcile reads the Observer. A silence of half the grace period (two
	// missed heartbeats at the defaults) is checked with a read of the Lease, since the watch may
	// be behind: a renewal found that way counts from the read, so reading early keeps that error
	// small (a read only at the grace period, after a watch 8 s behind, marked a lost cluster
	// 32 s after its last renewal instead of 20). The judgement at the grace period reads again.
	r.Observer.Known(mc.Name)
	silent, err := r.Observer.ConfirmedSilentFor(ctx, mc.Name, r.suspectAfter())
	if err != nil {
		return judgement{}, err
	}
	j := judgement{silent: silent, expired: silent > r.GracePeriod, reason: dbfleetv1alpha1.ReasonAgentLeaseExpired,
		detail: fmt.Sprintf("no lease renewal observed for %s", silent.Round(time.Second))}
	if !j.expired && !r.Observer.Renewed(mc.Name) &&
		meta.IsStatusConditionPresentAndEqual(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown) {
		// A hub that (re)started finds the Lease of a cluster an earlier hub marked lost as its agent
		// last renewed it: that is no renewal. Judged alive from it, the cluster would be Ready and
		// untainted for a grace period, restarting its toleration and letting a failover under way
		// demote and promote again (each time at a new epoch). It stays lost until this hub sees
		// its agent renew.
		j.expired, j.awaitingRenewal = true, true
	}
	if err := r.copyReport(ctx, mc, j.expired); err != nil {
		return judgement{}, err
	}
	if j.expired {
		// The message must not carry the growing silence: every reconcile would rewrite it, and
		// each rewrite is a MemberCluster event that reconciles again, a write loop for as long as
		// the cluster is down (the Event says how long it was silent).
		msg := fmt.Sprintf("no renewal of the agent's lease observed within the grace period (%s)", r.GracePeriod)
		setCondition(mc, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown, dbfleetv1alpha1.ReasonAgentLeaseExpired, msg)
		setCondition(mc, dbfleetv1alpha1.ConditionAgentConnected, metav1.ConditionFalse, dbfleetv1alpha1.ReasonAgentLeaseExpired, msg)
		return j, nil // the next Lease change brings the cluster back
	}
	if !r.Observer.LastObserved(mc.Name).IsZero() {
		msg := "the agent renews its lease"
		if a := mc.Status.Agent; a != nil && a.HeartbeatIntervalSeconds > 0 {
			msg = fmt.Sprintf("the agent renews its lease every %ds", a.HeartbeatIntervalSeconds)
		}
		setCondition(mc, dbfleetv1alpha1.ConditionAgentConnected, metav1.ConditionTrue, dbfleetv1alpha1.ReasonLeaseRenewed, msg)
	}
	// Look again when the silence becomes suspect, then just after the grace period would run out.
	next := r.GracePeriod - silent
	if silent < r.suspectAfter() {
		next = r.suspectAfter() - silent
	}
	j.recheck = next + time.Second/10
	return j, nil
}

// judgePush judges a Push cluster, which has no agent, by the hub's own probe of its API server.
// An answer counts as the cluster seen alive, on the Observer as an agent's renewal would (so
// the failover gate counts the silence the same way, on the hub's monotonic clock); Ready
// follows the answer to /readyz; no answer for the grace period makes it Ready=Unknown. A probe
// that fails within the grace period changes nothing, as one missed heartbeat would not.
func (r *Reconciler) judgePush(ctx context.Context, mc *dbfleetv1alpha1.MemberCluster) judgement {
	r.Observer.Known(mc.Name)
	probe := push.Reachability{Err: errors.New("the hub probes no Push cluster (it has no push provider)")}
	if r.Prober != nil {
		probe = r.Prober.Probe(ctx, mc.Name)
	}
	if probe.Reached {
		// The Observer compares a value only with itself: the hub's clock reading is always new.
		r.Observer.Observe(mc.Name, r.Clock.Now())
	}
	if probe.Err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("Probe of the member API server failed", "reached", probe.Reached, "error", probe.Err.Error())
	}
	silent, _ := r.Observer.SilentFor(mc.Name)
	j := judgement{silent: silent, expired: silent > r.GracePeriod, reason: dbfleetv1alpha1.ReasonMemberAPIServerUnreachable,
		detail: fmt.Sprintf("member API server not reached for %s (%v)", silent.Round(time.Second), probe.Err),
		// No watch event brings a Push cluster back: keep probing, expired or not.
		recheck: r.probeInterval()}
	setCondition(mc, dbfleetv1alpha1.ConditionAgentConnected, metav1.ConditionFalse, dbfleetv1alpha1.ReasonPushMode,
		"does not apply: the cluster is in Push mode, the hub drives it and probes its API server itself")
	switch {
	case j.expired:
		// As for agents, the message must not change from one probe to the next (the error does).
		setCondition(mc, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown, dbfleetv1alpha1.ReasonMemberAPIServerUnreachable,
			fmt.Sprintf("the hub has not reached the member API server within the grace period (%s)", r.GracePeriod))
	case probe.Ready:
		setCondition(mc, dbfleetv1alpha1.ConditionReady, metav1.ConditionTrue, dbfleetv1alpha1.ReasonMemberAPIServerReachable,
			"the hub reaches the member API server and its /readyz is ok")
		if probe.Version != "" {
			mc.Status.KubernetesVersion = probe.Version
		}
		if probe.Summary != nil {
			mc.Status.ResourceSummary = probe.Summary
		}
	case probe.Reached:
		setCondition(mc, dbfleetv1alpha1.ConditionReady, metav1.ConditionFalse, dbfleetv1alpha1.ReasonMemberAPIServerNotReady,
			"the member API server answers, but its /readyz is not ok")
	}
	return j
}

// probeInterval is how often the hub probes a Push cluster, and how long one probe may take: a
// quarter of the grace period, so that a lost cluster has missed about four probes when it is
// judged lost.
func (r *Reconciler) probeInterval() time.Duration {
	return r.GracePeriod / 4
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
