package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
	"github.com/dbfleet/dbfleet/test/framework"
)

// touch changes a label on the MemberDatabase so the agent reconciles it now.
func (s *share) touch(change func(*dbfleetv1alpha1.MemberDatabase)) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		if err := hub.Client.Get(s.ctx, client.ObjectKeyFromObject(s.mdb), mdb); err != nil {
			return err
		}
		mdb.Labels["touched"] = fmt.Sprint(time.Now().UnixNano())
		if change != nil {
			change(mdb)
		}
		return hub.Client.Update(s.ctx, mdb)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

func (s *share) podRole(name string) string {
	pod := &corev1.Pod{}
	if err := east.Client.Get(s.ctx, s.key(name), pod); err != nil {
		return "error: " + err.Error()
	}
	return pod.Labels[contract.LabelRole]
}

func (s *share) primaryLease() *coordinationv1.Lease {
	lease := &coordinationv1.Lease{}
	if err := east.Client.Get(s.ctx, s.key(contract.PrimaryLeaseName(s.db)), lease); err != nil {
		return nil
	}
	return lease
}

func (s *share) createPods(sts *appsv1.StatefulSet, ordinals ...int) {
	s.t.Helper()
	for _, o := range ordinals {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: fmt.Sprintf("%s-%d", s.db, o), Labels: sts.Spec.Template.Labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "database", Image: "postgres:16.4"}}},
		}
		if err := east.Client.Create(s.ctx, pod); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *share) eventually(what string, cond func() bool) {
	s.t.Helper()
	if err := framework.WaitFor(s.ctx, framework.DefaultTimeout, what, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		s.t.Fatal(err)
	}
}

func TestAgentFencesWhenItLosesTheHub(t *testing.T) {
	const fenceAfter = 15 * time.Second
	clock := clocktesting.NewFakeClock(time.Now())
	guard := fence.NewGuard(clock, fenceAfter)
	guard.Renewed(clock.Now())
	startAgentWithGuard(t, hub.Config, east.Config, guard)

	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.createPods(sts, 0, 1)
	s.eventually("primary labelled and primary Lease held", func() bool {
		l := s.primaryLease()
		return s.podRole(s.db+"-0") == "primary" && l != nil && *l.Spec.HolderIdentity == clusterName+"/1" &&
			l.Spec.RenewTime.Time.Equal(guard.LastRenewStart().Truncate(time.Microsecond)) && *l.Spec.LeaseDurationSeconds == 15
	})

	// The hub goes silent: fenceAfter passes with no successful renewal.
	fencedBefore := primariesFenced(t)
	clock.Step(fenceAfter + time.Second)
	s.touch(nil)
	s.eventually("fenced", func() bool {
		cur := &appsv1.StatefulSet{}
		_ = east.Client.Get(s.ctx, s.key(s.db), cur)
		return s.podRole(s.db+"-0") == contract.PodRoleFenced && cur.Annotations[specs.AnnotationFencedEpoch] == "1"
	})
	if s.podRole(s.db+"-1") != "replica" {
		t.Errorf("replica pod relabelled: %s", s.podRole(s.db+"-1"))
	}
	got := s.waitMDB("Fenced reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionFenced); c.Reason != dbfleetv1alpha1.ReasonHubLeaseExpired {
		t.Errorf("Fenced reason %s", c.Reason)
	}
	leaseAtFence := s.primaryLease().Spec.RenewTime.Time

	// The hub is reachable again, but says nothing new: the share stays fenced and the primary
	// Lease is not renewed (it expires on its own).
	guard.Renewed(clock.Now())
	s.touch(nil)
	s.waitMDB("still fenced after reconnect", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return m.Labels["touched"] != "" && condition(m, dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue)
	})
	if s.podRole(s.db+"-0") != contract.PodRoleFenced || !s.primaryLease().Spec.RenewTime.Time.Equal(leaseAtFence) {
		t.Errorf("a fenced primary came back on its own: role %s, lease renewed at %s (fenced at %s)",
			s.podRole(s.db+"-0"), s.primaryLease().Spec.RenewTime.Time, leaseAtFence)
	}
	if n := primariesFenced(t) - fencedBefore; n != 1 {
		t.Errorf("dbfleet_agent_primaries_fenced_total went up by %v for one fenced primary, want 1", n)
	}

	// The hub hands out epoch 2 for the same cluster: the share is unfenced at the new epoch.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Epoch = 2 })
	s.eventually("unfenced at epoch 2", func() bool {
		cur := &appsv1.StatefulSet{}
		_ = east.Client.Get(s.ctx, s.key(s.db), cur)
		l := s.primaryLease()
		_, fenced := cur.Annotations[specs.AnnotationFencedEpoch]
		return s.podRole(s.db+"-0") == "primary" && !fenced && l != nil && *l.Spec.HolderIdentity == clusterName+"/2"
	})

	// The hub demotes the share at epoch 3: the primary Lease is released at once (deleted), not
	// left to expire, before the agent reports the epoch the hub waits for.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Role, m.Spec.Epoch = dbfleetv1alpha1.RoleReplica, 3 })
	s.waitMDB("demotion reported", func(m *dbfleetv1alpha1.MemberDatabase) bool { return m.Status.Epoch == 3 })
	if l := s.primaryLease(); l != nil {
		t.Errorf("the demoted share still holds the primary Lease %s", *l.Spec.HolderIdentity)
	}
	if s.podRole(s.db+"-0") != "replica" {
		t.Errorf("demoted primary pod labelled %s", s.podRole(s.db+"-0"))
	}

	// A stale epoch is never acted on.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Role, m.Spec.Epoch = dbfleetv1alpha1.RolePrimary, 1 })
	stale := s.waitMDB("stale epoch refused", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionApplied)
		return c != nil && c.Reason == dbfleetv1alpha1.ReasonStaleEpoch && m.Status.ObservedGeneration == m.Generation
	})
	_ = stale
	cur := &appsv1.StatefulSet{}
	if err := east.Client.Get(s.ctx, s.key(s.db), cur); err != nil {
		t.Fatal(err)
	}
	if cur.Labels[dbfleetv1alpha1.LabelEpoch] != "3" || s.primaryLease() != nil || s.podRole(s.db+"-0") != "replica" {
		t.Errorf("the stale epoch was applied: StatefulSet epoch %s, pod role %s", cur.Labels[dbfleetv1alpha1.LabelEpoch], s.podRole(s.db+"-0"))
	}
}

// primariesFenced reads dbfleet_agent_primaries_fenced_total from the registry the in-process
// agent reports to.
func primariesFenced(t *testing.T) float64 {
	t.Helper()
	fams, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "dbfleet_agent_primaries_fenced_total" {
			return f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("dbfleet_agent_primaries_fenced_total is not registered")
	return 0
}
