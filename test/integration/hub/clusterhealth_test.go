package hub

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/heartbeat"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/clusterhealth"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
	"github.com/dbfleet/dbfleet/test/framework"
)

// startClusterHealth runs the health controller with a short grace period.
func startClusterHealth(t *testing.T, grace time.Duration) {
	t.Helper()
	startHubWith(t, func(ctx context.Context, mgr ctrlManager) error {
		return clusterhealth.Setup(ctx, mgr, hub.Config{ClusterGracePeriod: grace})
	})
}

// agentBeats runs a real heartbeat for the cluster until the returned stop is called.
func agentBeats(t *testing.T, cluster string) (stop func()) {
	t.Helper()
	disco, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	hb := &heartbeat.Heartbeat{Cluster: cluster, Hub: env.Client, Member: env.Client, MemberDiscovery: disco,
		Interval: 200 * time.Millisecond, FenceAfter: time.Second, Clock: clock.RealClock{}}
	return framework.Run(t, "heartbeat of "+cluster, hb.Start)
}

func (f *fixture) waitMember(cluster, what string, cond func(*dbfleetv1alpha1.MemberCluster) bool) *dbfleetv1alpha1.MemberCluster {
	f.t.Helper()
	mc := &dbfleetv1alpha1.MemberCluster{}
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			return false, err
		}
		return cond(mc), nil
	})
	if err != nil {
		f.t.Fatalf("%v\nspec.taints=%v status=%+v", err, mc.Spec.Taints, mc.Status)
	}
	return mc
}

func healthTaints(mc *dbfleetv1alpha1.MemberCluster, key string) map[corev1.TaintEffect]bool {
	got := map[corev1.TaintEffect]bool{}
	for _, t := range mc.Spec.Taints {
		if t.Key == key && t.TimeAdded != nil {
			got[t.Effect] = true
		}
	}
	return got
}

func hasTaint(mc *dbfleetv1alpha1.MemberCluster, key string) bool {
	for _, t := range mc.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

func TestSilentAgentGoesUnknownAndTainted(t *testing.T) {
	const grace = 2 * time.Second
	f := newFixture(t)
	startClusterHealth(t, grace)
	a := f.member("a", "r1", 100)
	f.updateMember(a, func(mc *dbfleetv1alpha1.MemberCluster) {
		mc.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	})
	stop := agentBeats(t, a)
	f.waitMember(a, "connected", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		return meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) && mc.Status.LastHeartbeat != nil
	})

	stop()
	stoppedAt := time.Now()
	mc := f.waitMember(a, "Ready=Unknown and tainted", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		t := healthTaints(mc, dbfleetv1alpha1.TaintClusterUnreachable)
		return meta.IsStatusConditionPresentAndEqual(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown) &&
			t[corev1.TaintEffectNoSchedule] && t[corev1.TaintEffectNoExecute]
	})
	detected := time.Since(stoppedAt)
	t.Logf("detected a silent agent after %s (grace %s)", detected.Round(10*time.Millisecond), grace)
	if detected < grace {
		t.Errorf("marked Unknown after %s, before the grace period %s", detected, grace)
	}
	if c := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady); c.Reason != dbfleetv1alpha1.ReasonAgentLeaseExpired {
		t.Errorf("Ready reason %s", c.Reason)
	}
	if !meta.IsStatusConditionFalse(mc.Status.Conditions, dbfleetv1alpha1.ConditionAgentConnected) {
		t.Error("AgentConnected is not False")
	}
	if !hasTaint(mc, "dedicated") {
		t.Errorf("the user's taint was lost: %v", mc.Spec.Taints)
	}

	// The agent comes back: Ready again, health taints gone, the user's taint kept.
	agentBeats(t, a)
	f.waitMember(a, "recovered", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		return meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) &&
			meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionAgentConnected) &&
			len(healthTaints(mc, dbfleetv1alpha1.TaintClusterUnreachable)) == 0 && hasTaint(mc, "dedicated")
	})
}

func TestNotReadyMemberIsTaintedNotReady(t *testing.T) {
	f := newFixture(t)
	startClusterHealth(t, time.Minute)
	a := f.member("a", "r1", 100)
	f.setReady(a, metav1.ConditionFalse) // as an agent whose member API server fails
	f.waitMember(a, "not-ready taints", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		t := healthTaints(mc, dbfleetv1alpha1.TaintClusterNotReady)
		return t[corev1.TaintEffectNoSchedule] && t[corev1.TaintEffectNoExecute] &&
			len(healthTaints(mc, dbfleetv1alpha1.TaintClusterUnreachable)) == 0
	})
}

// TestTheHubCopiesTheAgentsReport checks that the agent's MemberClusterReport reaches the
// MemberCluster's status (settings, version, capacity and Ready, with its taint), and that a
// report under another name, which an agent could create in its namespace, reaches nothing.
func TestTheHubCopiesTheAgentsReport(t *testing.T) {
	f := newFixture(t)
	startClusterHealth(t, time.Minute)
	a, b := f.member("a", "r1", 100), f.member("b", "r1", 100)
	report := &dbfleetv1alpha1.MemberClusterReport{ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace(a), Name: a}}
	report.Status = dbfleetv1alpha1.MemberClusterReportStatus{
		Agent:             &dbfleetv1alpha1.AgentSettings{HeartbeatIntervalSeconds: 5, FenceAfterSeconds: 15, Version: "v0.0.1-test"},
		KubernetesVersion: "v1.35.4",
		ResourceSummary: &dbfleetv1alpha1.ResourceSummary{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
			Allocated:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")},
		},
		Conditions: []metav1.Condition{{Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: dbfleetv1alpha1.ReasonMemberAPIServerUnhealthy, Message: "the agent cannot reach its member API server: refused", LastTransitionTime: metav1.Now()}},
	}
	if err := f.c.Create(f.ctx, report); err != nil {
		t.Fatal(err)
	}
	// A report in a's namespace under b's name: inert.
	decoy := &dbfleetv1alpha1.MemberClusterReport{ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace(a), Name: b}}
	decoy.Status.KubernetesVersion = "forged"
	if err := f.c.Create(f.ctx, decoy); err != nil {
		t.Fatal(err)
	}

	f.waitMember(a, "the report copied, Ready=False and tainted not-ready", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		ready := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady)
		cpu := mc.Status.ResourceSummary.Allocated[corev1.ResourceCPU]
		return ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == dbfleetv1alpha1.ReasonMemberAPIServerUnhealthy &&
			mc.Status.KubernetesVersion == "v1.35.4" && mc.Status.Agent != nil && mc.Status.Agent.Version == "v0.0.1-test" &&
			cpu.Cmp(resource.MustParse("3")) == 0 && healthTaints(mc, dbfleetv1alpha1.TaintClusterNotReady)[corev1.TaintEffectNoExecute]
	})

	report.Status.Conditions[0].Status, report.Status.Conditions[0].Reason = metav1.ConditionTrue, dbfleetv1alpha1.ReasonAgentReady
	if err := f.c.Update(f.ctx, report); err != nil {
		t.Fatal(err)
	}
	f.waitMember(a, "Ready=True and untainted", func(mc *dbfleetv1alpha1.MemberCluster) bool {
		return meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) &&
			len(healthTaints(mc, dbfleetv1alpha1.TaintClusterNotReady)) == 0
	})

	mc := &dbfleetv1alpha1.MemberCluster{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Name: b}, mc); err != nil {
		t.Fatal(err)
	}
	if mc.Status.KubernetesVersion != "" {
		t.Errorf("MemberCluster %s took version %q from a report in another cluster's namespace", b, mc.Status.KubernetesVersion)
	}
}

// TestAgentClockSkewDoesNotMatter renews a Lease whose timestamps are an hour in the past, as an
// agent with a wrong clock would: the hub only looks at whether the value changes.
func TestAgentClockSkewDoesNotMatter(t *testing.T) {
	const grace = 2 * time.Second
	f := newFixture(t)
	startClusterHealth(t, grace)
	a := f.member("a", "r1", 100)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace(a), Name: dbfleetv1alpha1.AgentLeaseName,
			Labels: map[string]string{dbfleetv1alpha1.LabelCluster: a}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(a), LeaseDurationSeconds: ptr.To[int32](1),
			RenewTime: &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}},
	}
	if err := f.c.Create(f.ctx, lease); err != nil {
		t.Fatal(err)
	}
	// Renew (with the skewed clock) until three grace periods have passed by the test's clock.
	deadline := time.Now().Add(3 * grace)
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "three grace periods of skewed renewals", func(ctx context.Context) (bool, error) {
		lease.Spec.RenewTime = &metav1.MicroTime{Time: lease.Spec.RenewTime.Add(time.Second)}
		if err := f.c.Update(ctx, lease); err != nil {
			return false, err
		}
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := f.c.Get(ctx, client.ObjectKey{Name: a}, mc); err != nil {
			return false, err
		}
		if !meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) {
			t.Fatalf("a renewing agent with a skewed clock was marked %v", mc.Status.Conditions)
		}
		return time.Now().After(deadline), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAWatchThatFellBehindIsNotASilentAgent runs the health reconcile against the real API
// server with a Lease watch that delivered nothing since the first renewal, as when the hub or
// the API server stalled: a renewal the API server has keeps the cluster Ready, and only a
// silence the API server confirms marks it Ready=Unknown and tainted.
func TestAWatchThatFellBehindIsNotASilentAgent(t *testing.T) {
	const grace = 20 * time.Second
	f := newFixture(t)
	a := f.member("a", "r1", 100)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace(a), Name: dbfleetv1alpha1.AgentLeaseName,
			Labels: map[string]string{dbfleetv1alpha1.LabelCluster: a}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(a), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if err := f.c.Create(f.ctx, lease); err != nil {
		t.Fatal(err)
	}
	fakeClock := clocktesting.NewFakeClock(time.Now())
	obs := liveness.NewObserver(fakeClock)
	obs.SetReader(clusterhealth.ReadRenewTime(f.c)) // f.c reads the API server, no cache
	obs.Observe(a, lease.Spec.RenewTime.Time)       // the last renewal the watch delivered
	r := &clusterhealth.Reconciler{Client: f.c, Recorder: events.NewFakeRecorder(10), Clock: fakeClock,
		GracePeriod: grace, Observer: obs}
	reconcile := func() (*dbfleetv1alpha1.MemberCluster, time.Duration) {
		t.Helper()
		res, err := r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: a}})
		if err != nil {
			t.Fatal(err)
		}
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := f.c.Get(f.ctx, client.ObjectKey{Name: a}, mc); err != nil {
			t.Fatal(err)
		}
		return mc, res.RequeueAfter
	}
	if _, next := reconcile(); next != grace/2+time.Second/10 {
		t.Errorf("right after a renewal the reconcile looks again in %s, want when the silence becomes suspect (%s)", next, grace/2+time.Second/10)
	}

	// The agent renews; the hub's watch does not deliver it; half the grace period goes by, and
	// the hub checks its silence with the API server: a renewal, counted from now.
	lease.Spec.RenewTime = &metav1.MicroTime{Time: lease.Spec.RenewTime.Add(5 * time.Second)}
	if err := f.c.Update(f.ctx, lease); err != nil {
		t.Fatal(err)
	}
	fakeClock.Step(grace/2 + time.Second)
	mc, _ := reconcile()
	if !meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) || hasTaint(mc, dbfleetv1alpha1.TaintClusterUnreachable) {
		t.Fatalf("a cluster whose renewal the watch had not delivered was marked %v, taints %v", mc.Status.Conditions, mc.Spec.Taints)
	}
	if silent, _ := obs.SilentFor(a); silent != 0 {
		t.Errorf("silent for %s after the read found the renewal, want 0", silent)
	}

	// Now the agent is silent for the API server too: at the grace period the silence is read
	// again, confirmed, and acted on.
	fakeClock.Step(grace/2 + time.Second)
	if mc, next := reconcile(); !meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) || next != grace/2-time.Second+time.Second/10 {
		t.Fatalf("suspect but within the grace period: %v, next look in %s; want Ready, and a look when the grace period runs out", mc.Status.Conditions, next)
	}
	fakeClock.Step(grace / 2)
	mc, _ = reconcile()
	if !meta.IsStatusConditionPresentAndEqual(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady, metav1.ConditionUnknown) ||
		!hasTaint(mc, dbfleetv1alpha1.TaintClusterUnreachable) {
		t.Fatalf("a confirmed silence left the cluster %v, taints %v; want Ready=Unknown and the unreachable taint", mc.Status.Conditions, mc.Spec.Taints)
	}

	// Reconciled again while it stays silent (every write of the MemberCluster reconciles it), the
	// lost cluster is not written again: its status says nothing that grows with the silence. (The
	// reconcile after the taints were added records their generation in the conditions, once.)
	mc, _ = reconcile()
	fakeClock.Step(time.Minute)
	if again, _ := reconcile(); again.ResourceVersion != mc.ResourceVersion {
		t.Errorf("a lost cluster was written again a minute later: status %v", again.Status.Conditions)
	}
}
