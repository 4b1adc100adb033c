package clusterhealth

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/heartbeat"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
)

// A renewal counts from when the watch delivers it, before any reconcile runs: a lagging work
// queue must not look like a silent agent.
func TestLeaseEventsAreObservedBeforeReconcile(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	r := &Reconciler{Clock: clock, Observer: liveness.NewObserver(clock)}
	lease := func(name, cluster string, renew time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: name,
				Labels: map[string]string{dbfleetv1alpha1.LabelCluster: cluster}},
			Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renew}},
		}
	}

	clock.Step(30 * time.Second)
	reqs := r.observeLease(context.Background(), lease(heartbeat.LeaseName, "east", clock.Now()))
	if len(reqs) != 1 || reqs[0].Name != "east" {
		t.Fatalf("an agent Lease maps to %v, want the MemberCluster east", reqs)
	}
	if silent, _ := r.Observer.SilentFor("east"); silent != 0 {
		t.Errorf("east silent for %s right after its renewal was delivered, want 0", silent)
	}

	// Another Lease in the namespace (a leader election, say) is neither observed nor mapped.
	clock.Step(10 * time.Second)
	if reqs := r.observeLease(context.Background(), lease("other", "east", clock.Now())); reqs != nil {
		t.Errorf("a foreign Lease maps to %v, want nothing", reqs)
	}
	if silent, _ := r.Observer.SilentFor("east"); silent != 10*time.Second {
		t.Errorf("east silent for %s after a foreign Lease changed, want 10s", silent)
	}
}
