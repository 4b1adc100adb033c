package heartbeat

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
)

// LeaseName is the name of the agent's Lease in member-<cluster> on the hub.
const LeaseName = "dbfleet-agent"

// Reasons of the conditions the agent sets on its MemberCluster.
const (
	ReasonAgentReady         = "AgentReady"
	ReasonMemberAPIUnhealthy = "MemberAPIServerUnhealthy"
	ReasonHeartbeating       = "Heartbeating"
)

// Heartbeat renews the agent's hub Lease and reports the member cluster's status.
type Heartbeat struct {
	// Cluster is the MemberCluster name.
	Cluster string
	// Hub reaches the hub directly: the agent may get and update only its own Lease and
	// MemberCluster, so it cannot list and watch them into a cache.
	Hub client.Client
	// Member reads the member's Nodes and Pods (a cache is fine).
	Member client.Reader
	// MemberDiscovery asks the member API server for its version, which doubles as a health check.
	MemberDiscovery discovery.ServerVersionInterface
	Interval        time.Duration
	FenceAfter      time.Duration
	AgentVersion    string
	Clock           clock.WithTicker
	// Guard learns of each successful renewal; nil when nothing fences on it.
	Guard *fence.Guard

	// lease is the Lease as the last renewal left it, so the next one needs no read.
	lease *coordinationv1.Lease
	// known is the MemberCluster as the hub last had it to the agent's knowledge, and
	// beatsSinceRead how many beats ago it was read: a beat with nothing new to report reads
	// nothing, which at 1,000 clusters halves the hub requests of the whole fleet at rest.
	known          *dbfleetv1alpha1.MemberCluster
	beatsSinceRead int
	// renewalFailed tells the report loop that a renewal failed since its last report.
	renewalFailed atomic.Bool
}

// rereadEvery bounds how many beats the agent trusts its copy of the MemberCluster: the hub
// may have changed its conditions (Ready=Unknown when it missed renewals) without the agent
// failing a renewal, and the agent then restores them within this many beats (a minute at the
// default 5 s). A failed renewal drops the copy at once. At 1,000 clusters every 6th beat was
// 33 reads a second of the hub API server's budget.
const rereadEvery = 12

// Start runs until ctx ends, renewing the Lease and reporting the status every Interval. It
// implements manager.Runnable.
//
// The two run in separate loops: a status report that waits (the API server queues the agents'
// bulk writes behind everything else when it runs out of CPU, and rejects and retries them) must
// never hold back the next renewal, on which the hub's view of the cluster and the agent's own
// fencing rest. When they shared one loop, a bench-scale run (1,000 clusters, 3,000 databases
// being created) had counted 629 lapses of healthy clusters about two minutes in, while nothing
// waited in the renewals' own priority level: the agents' status reports waited in workload-low.
func (h *Heartbeat) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("heartbeat").WithValues("cluster", h.Cluster)
	ctx = ctrl.LoggerInto(ctx, log)
	reports := make(chan struct{})
	go func() {
		defer close(reports)
		h.every(ctx, func() {
			if err := h.Report(ctx); err != nil {
				log.Error(err, "Reporting the cluster status failed")
			}
		})
	}()
	h.every(ctx, func() {
		if err := h.Renew(ctx); err != nil {
			log.Error(err, "Renewing the hub lease failed")
		}
	})
	<-reports
	return nil
}

// every runs f now and then every Interval until ctx ends; a tick missed while f runs is dropped.
func (h *Heartbeat) every(ctx context.Context, f func()) {
	ticker := h.Clock.NewTicker(h.Interval)
	defer ticker.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// NeedLeaderElection is false: the agent runs one replica per member cluster.
func (h *Heartbeat) NeedLeaderElection() bool { return false }

// Beat renews the Lease, then reports the cluster status: one Renew and one Report, in order.
func (h *Heartbeat) Beat(ctx context.Context) error {
	if err := h.Renew(ctx); err != nil {
		return err
	}
	return h.Report(ctx)
}

// Renew renews the hub Lease and tells the Guard. Safe to run concurrently with Report.
func (h *Heartbeat) Renew(ctx context.Context) error {
	start := h.Clock.Now() // freshness counts from the start of the request, never its end
	if err := h.renewLease(ctx); err != nil {
		h.lease = nil // after a failure, trust no copy
		// The hub may have marked the cluster Unknown meanwhile: the next report reads it.
		h.renewalFailed.Store(true)
		return err
	}
	if h.Guard != nil {
		h.Guard.Renewed(start)
	}
	return nil
}

// Report writes the MemberCluster status when it changed. Safe to run concurrently with Renew.
func (h *Heartbeat) Report(ctx context.Context) error {
	if h.renewalFailed.Swap(false) {
		h.known = nil
	}
	if err := h.reportStatus(ctx); err != nil {
		h.known = nil
		return err
	}
	return nil
}

func (h *Heartbeat) renewLease(ctx context.Context) error {
	now := metav1.NewMicroTime(h.Clock.Now())
	key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(h.Cluster), Name: LeaseName}
	if h.lease != nil {
		lease := h.lease.DeepCopy()
		lease.Spec.RenewTime = &now
		err := h.Hub.Update(ctx, lease)
		if err == nil {
			h.lease = lease
			return nil
		}
		h.lease = nil
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return fmt.Errorf("renew hub lease: %w", err)
		}
		// Changed or deleted behind the agent's back: read it and try again.
	}
	lease := &coordinationv1.Lease{}
	err := h.Hub.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
				Labels: map[string]string{dbfleetv1alpha1.LabelCluster: h.Cluster}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(h.Cluster),
				LeaseDurationSeconds: ptr.To(int32(h.FenceAfter / time.Second)),
				AcquireTime:          &now,
				RenewTime:            &now,
			},
		}
		if err := h.Hub.Create(ctx, lease); err != nil {
			return fmt.Errorf("create hub lease: %w", err)
		}
		h.lease = lease
		return nil
	}
	if err != nil {
		return fmt.Errorf("read hub lease: %w", err)
	}
	lease.Spec.HolderIdentity = ptr.To(h.Cluster)
	lease.Spec.LeaseDurationSeconds = ptr.To(int32(h.FenceAfter / time.Second))
	lease.Spec.RenewTime = &now
	if err := h.Hub.Update(ctx, lease); err != nil {
		return fmt.Errorf("renew hub lease: %w", err)
	}
	h.lease = lease
	return nil
}

// reportStatus writes the MemberCluster status when it changed. It reads the MemberCluster only
// when it has no copy or its copy is rereadEvery beats old, and then from the API server's watch
// cache (resourceVersion "0"), not etcd. Every patch carries the resourceVersion of the copy it
// was computed against: a patch from a copy older than the hub's last change (the hub writes
// conditions into the same list) is refused with a conflict, and the agent reads the
// MemberCluster from etcd and patches once more. So the agent never writes back conditions the
// hub has changed since, and a change to report costs one request, not a read and a write.
func (h *Heartbeat) reportStatus(ctx context.Context) error {
	h.beatsSinceRead++
	base := h.known
	if base == nil || h.beatsSinceRead >= rereadEvery {
		fresh, err := h.readMemberCluster(ctx, cachedRead)
		if err != nil {
			return err
		}
		base = fresh
	}
	err := h.patchStatus(ctx, base)
	if apierrors.IsConflict(err) {
		fresh, rerr := h.readMemberCluster(ctx, consistentRead)
		if rerr != nil {
			return rerr
		}
		err = h.patchStatus(ctx, fresh)
	}
	return err
}

// A read of the MemberCluster from the API server's watch cache, or from etcd.
const (
	cachedRead     = "0"
	consistentRead = ""
)

func (h *Heartbeat) readMemberCluster(ctx context.Context, resourceVersion string) (*dbfleetv1alpha1.MemberCluster, error) {
	mc := &dbfleetv1alpha1.MemberCluster{}
	opts := &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: resourceVersion}}
	if err := h.Hub.Get(ctx, client.ObjectKey{Name: h.Cluster}, mc, opts); err != nil {
		return nil, fmt.Errorf("read MemberCluster: %w", err)
	}
	h.beatsSinceRead = 0
	return mc, nil
}

// patchStatus sets the agent's status on a copy of base and patches it, against base's
// resourceVersion, when it differs from base. The patched (or unchanged) copy becomes known.
func (h *Heartbeat) patchStatus(ctx context.Context, base *dbfleetv1alpha1.MemberCluster) error {
	mc := base.DeepCopy()
	if err := h.desiredStatus(ctx, mc); err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(base.Status, mc.Status) {
		h.known = base
		return nil
	}
	if err := h.Hub.Status().Patch(ctx, mc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("report MemberCluster status: %w", err)
	}
	h.known = mc
	return nil
}

// desiredStatus sets in mc's status what the agent reports: its settings, its connection, and
// the member's version, health and capacity.
func (h *Heartbeat) desiredStatus(ctx context.Context, mc *dbfleetv1alpha1.MemberCluster) error {
	st := &mc.Status
	gen := mc.Generation
	st.Agent = &dbfleetv1alpha1.AgentSettings{
		HeartbeatIntervalSeconds: int32(h.Interval / time.Second),
		FenceAfterSeconds:        int32(h.FenceAfter / time.Second),
		Version:                  h.AgentVersion,
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: dbfleetv1alpha1.ConditionAgentConnected, Status: metav1.ConditionTrue, Reason: ReasonHeartbeating,
		Message: fmt.Sprintf("the agent renews its hub lease every %s", h.Interval), ObservedGeneration: gen,
	})
	version, verr := h.MemberDiscovery.ServerVersion()
	if verr != nil {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonMemberAPIUnhealthy,
			Message: fmt.Sprintf("the agent cannot reach its member API server: %v", verr), ObservedGeneration: gen,
		})
	} else {
		st.KubernetesVersion = version.GitVersion
		summary, err := Summarize(ctx, h.Member)
		if err != nil {
			return err
		}
		st.ResourceSummary = summary
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonAgentReady,
			Message: "the agent and its member API server are healthy", ObservedGeneration: gen,
		})
	}
	return nil
}

// Summarize adds up the member's capacity in Karmada's shape: the allocatable resources of its
// schedulable Ready Nodes, and the requests of the Pods scheduled onto them that still run.
func Summarize(ctx context.Context, member client.Reader) (*dbfleetv1alpha1.ResourceSummary, error) {
	nodes := &corev1.NodeList{}
	if err := member.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list member Nodes: %w", err)
	}
	pods := &corev1.PodList{}
	if err := member.List(ctx, pods); err != nil {
		return nil, fmt.Errorf("list member Pods: %w", err)
	}
	summary := &dbfleetv1alpha1.ResourceSummary{Allocatable: corev1.ResourceList{}, Allocated: corev1.ResourceList{}}
	usable := map[string]bool{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Spec.Unschedulable || !nodeReady(n) {
			continue
		}
		usable[n.Name] = true
		add(summary.Allocatable, n.Status.Allocatable)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !usable[p.Spec.NodeName] || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			add(summary.Allocated, c.Resources.Requests)
		}
	}
	return summary, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func add(into, from corev1.ResourceList) {
	for name, q := range from {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}
