package heartbeat

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/resourcesummary"
)

// Heartbeat renews the agent's hub Lease and reports the member cluster's status.
type Heartbeat struct {
	// Cluster is the MemberCluster name.
	Cluster string
	// Hub reaches the hub directly: the agent may get and update only its own Lease and
	// MemberClusterReport, so it cannot list and watch them into a cache.
	Hub client.Client
	// Member reads the member's Nodes and Pods (a cache is fine).
	Member client.Reader
	// MemberDiscovery asks the member API server for its version, which doubles as a health check.
	// Its call takes no context: build it with NewMemberDiscovery, which bounds it.
	MemberDiscovery discovery.ServerVersionInterface
	Interval        time.Duration
	FenceAfter      time.Duration
	AgentVersion    string
	Clock           clock.WithTicker
	// Guard learns of each successful renewal; nil when nothing fences on it.
	Guard *fence.Guard

	// lease is the Lease as the last renewal left it, so the next one needs no read.
	lease *coordinationv1.Lease
	// known is the report as the agent last wrote or read it: only the agent writes its report,
	// so a beat with nothing new to report costs no request.
	known *dbfleetv1alpha1.MemberClusterReport
}

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
		h.every(ctx, nil, func() {
			if err := h.Report(ctx); err != nil {
				log.Error(err, "Reporting the cluster status failed")
			}
		})
	}()
	// A renewal out of turn is asked for by a share being promoted whose last renewal is old
	// (member's awaitFreshRenewal): its first Lease should have most of fenceAfter to run.
	var wanted <-chan struct{}
	if h.Guard != nil {
		wanted = h.Guard.RenewalRequests()
	}
	h.every(ctx, wanted, func() {
		if err := h.Renew(ctx); err != nil {
			log.Error(err, "Renewing the hub lease failed")
		}
	})
	<-reports
	return nil
}

// every runs f now and then every Interval, or at once when wake receives, until ctx ends; a tick
// missed while f runs is dropped.
func (h *Heartbeat) every(ctx context.Context, wake <-chan struct{}, f func()) {
	ticker := h.Clock.NewTicker(h.Interval)
	defer ticker.Stop()
	for {
		f()
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		case <-wake:
		}
	}
}

// NewMemberDiscovery returns the client the heartbeat asks for the member's version, on its own
// copy of the member's config with a timeout: ServerVersion takes no context, and without one a
// member API server that stopped answering (rather than refusing) would hold the report loop
// forever and leave the cluster reported healthy. The timeout is a heartbeat interval, so the
// probe is over before the next report is due, and never under 5 s, what the hub allows a Push
// member's API server at the default grace period: a member slower than that is reported
// unhealthy. The config is never used for watches, which a client timeout would cut.
func NewMemberDiscovery(member *rest.Config, interval time.Duration) (*discovery.DiscoveryClient, error) {
	cfg := rest.CopyConfig(member)
	cfg.Timeout = max(interval, minVersionTimeout)
	return discovery.NewDiscoveryClientForConfig(cfg)
}

// minVersionTimeout is the least time NewMemberDiscovery gives the member API server to answer.
const minVersionTimeout = 5 * time.Second

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
//
// One renewal may take at most fenceAfter: freshness counts from its start, so one that ends
// later can no longer keep the agent fresh, and waiting longer (on a connection that died
// without a word, say) would only hold back the next one, the agent's only way back.
func (h *Heartbeat) Renew(ctx context.Context) error {
	start := h.Clock.Now() // freshness counts from the start of the request, never its end
	rctx, cancel := context.WithTimeout(ctx, h.FenceAfter)
	defer cancel()
	err := h.renewLease(rctx)
	renewalSeconds.Observe(h.Clock.Since(start).Seconds())
	if err != nil {
		renewals.WithLabelValues("error").Inc()
		h.lease = nil // after a failure, trust no copy
		return err
	}
	renewals.WithLabelValues("ok").Inc()
	if h.Guard != nil {
		h.Guard.Renewed(start)
	}
	return nil
}

// reportTimeout bounds one report: the hub API server itself gives up on a request after a
// minute (kube-apiserver's --request-timeout default), throttled writes included, so a report
// still waiting then waits on a connection that died, and holds back the next one.
const reportTimeout = time.Minute

// Report writes the cluster's MemberClusterReport when it changed. Safe to run concurrently
// with Renew.
func (h *Heartbeat) Report(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	if err := h.report(ctx); err != nil {
		h.known = nil // after a failure, trust no copy: the next beat reads the report again
		return err
	}
	return nil
}

// renewLease renews the agent's hub Lease. Its duration is fenceAfter rounded up to whole
// seconds: it tells the hub how long the agent may still act for its primaries, which must never
// be understated.
func (h *Heartbeat) renewLease(ctx context.Context) error {
	now := metav1.NewMicroTime(h.Clock.Now())
	key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(h.Cluster), Name: dbfleetv1alpha1.AgentLeaseName}
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
				LeaseDurationSeconds: ptr.To(fence.SecondsUp(h.FenceAfter)),
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
	lease.Spec.LeaseDurationSeconds = ptr.To(fence.SecondsUp(h.FenceAfter))
	lease.Spec.RenewTime = &now
	if err := h.Hub.Update(ctx, lease); err != nil {
		return fmt.Errorf("renew hub lease: %w", err)
	}
	h.lease = lease
	return nil
}

// report writes the agent's MemberClusterReport (member-<cluster>/<cluster>) when what it would
// say differs from the copy the agent knows. It reads the report only when it has no copy (at
// start and after a failure), and creates it when there is none. Each update carries the
// resourceVersion of the copy it was computed against: when someone else changed or deleted the
// report meanwhile, the write is refused, and the agent reads the report and writes once more.
func (h *Heartbeat) report(ctx context.Context) error {
	err := h.writeReport(ctx)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) {
		h.known = nil
		err = h.writeReport(ctx)
	}
	return err
}

func (h *Heartbeat) writeReport(ctx context.Context) error {
	if h.known == nil {
		known, err := h.readReport(ctx)
		if err != nil {
			return err
		}
		h.known = known
	}
	desired := h.known.DeepCopy()
	if err := h.desiredStatus(ctx, &desired.Status); err != nil {
		return err
	}
	if h.known.ResourceVersion != "" && equality.Semantic.DeepEqual(h.known.Status, desired.Status) {
		return nil
	}
	if h.known.ResourceVersion == "" {
		if err := h.Hub.Create(ctx, desired); err != nil {
			return fmt.Errorf("create MemberClusterReport: %w", err)
		}
	} else if err := h.Hub.Update(ctx, desired); err != nil {
		return fmt.Errorf("update MemberClusterReport: %w", err)
	}
	h.known = desired
	return nil
}

// readReport reads the agent's report from the API server, or returns a new one to create.
func (h *Heartbeat) readReport(ctx context.Context) (*dbfleetv1alpha1.MemberClusterReport, error) {
	key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(h.Cluster), Name: h.Cluster}
	report := &dbfleetv1alpha1.MemberClusterReport{}
	err := h.Hub.Get(ctx, key, report)
	if apierrors.IsNotFound(err) {
		return &dbfleetv1alpha1.MemberClusterReport{ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{dbfleetv1alpha1.LabelCluster: h.Cluster},
		}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read MemberClusterReport: %w", err)
	}
	return report, nil
}

// desiredStatus sets in st what the agent reports: its settings, and the member's version,
// health and capacity.
func (h *Heartbeat) desiredStatus(ctx context.Context, st *dbfleetv1alpha1.MemberClusterReportStatus) error {
	// Rounded up: the hub waits the reported fenceAfter (plus a margin) before it promotes away
	// from a silent agent, and must never wait less than the agent keeps its primaries.
	st.Agent = &dbfleetv1alpha1.AgentSettings{
		HeartbeatIntervalSeconds: fence.SecondsUp(h.Interval),
		FenceAfterSeconds:        fence.SecondsUp(h.FenceAfter),
		Version:                  h.AgentVersion,
	}
	version, verr := h.MemberDiscovery.ServerVersion()
	if verr != nil {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: dbfleetv1alpha1.ReasonMemberAPIServerUnhealthy,
			Message: fmt.Sprintf("the agent cannot reach its member API server: %v", verr),
		})
		return nil
	}
	st.KubernetesVersion = version.GitVersion
	summary, err := resourcesummary.Summarize(ctx, h.Member)
	if err != nil {
		return err
	}
	st.ResourceSummary = summary
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: dbfleetv1alpha1.ReasonAgentReady,
		Message: "the agent and its member API server are healthy",
	})
	return nil
}
