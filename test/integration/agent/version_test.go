package agent

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// setRollout writes StatefulSet status as the member's StatefulSet controller does during a
// rolling update: updated of the pods run updateRevision, and currentRevision becomes
// updateRevision once every pod is updated and ready.
func (s *share) setRollout(current, update string, updated, ready int32) {
	s.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := &appsv1.StatefulSet{}
		if err := east.Client.Get(s.ctx, s.key(s.db), sts); err != nil {
			return err
		}
		n := *sts.Spec.Replicas
		sts.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: sts.Generation, Replicas: n, ReadyReplicas: ready, AvailableReplicas: ready,
			CurrentReplicas: n - updated, UpdatedReplicas: updated, CurrentRevision: current, UpdateRevision: update,
		}
		return east.Client.Status().Update(s.ctx, sts)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// A share reports the version it runs only once its StatefulSet's rollout of that version is
// done: while the pods are being replaced it keeps reporting the version before, which is what
// the hub's version roll waits on.
func TestShareReportsItsVersionOnceItsRolloutIsDone(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShare(t, 2, 1000, dbfleetv1alpha1.RoleReplica)
	s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.setRollout("r1", "r1", 2, 2)
	s.waitMDB("running 16.4", func(m *dbfleetv1alpha1.MemberDatabase) bool { return m.Status.Version == "16.4" })

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m := &dbfleetv1alpha1.MemberDatabase{}
		if err := hub.Client.Get(s.ctx, client.ObjectKeyFromObject(s.mdb), m); err != nil {
			return err
		}
		m.Spec.Database.Version = "16.5"
		return hub.Client.Update(s.ctx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.waitSTS("the StatefulSet on 16.5", func(sts *appsv1.StatefulSet) bool {
		return sts.Spec.Template.Spec.Containers[0].Image == "postgres:16.5"
	})
	// The highest ordinal replaced and ready, the other not yet.
	s.setRollout("r1", "r2", 1, 2)
	got := s.waitMDB("the rollout reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return m.Status.ObservedGeneration == m.Generation && condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionFalse)
	})
	if got.Status.Version != "16.4" {
		t.Errorf("status.version %q half-way through the rollout, want 16.4 still", got.Status.Version)
	}
	s.setRollout("r2", "r2", 2, 2)
	s.waitMDB("running 16.5", func(m *dbfleetv1alpha1.MemberDatabase) bool { return m.Status.Version == "16.5" })
}
