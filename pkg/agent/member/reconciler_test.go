package member

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

func TestLookAfterKeepsAThirdOfTheLeaseInHand(t *testing.T) {
	const fenceAfter = 15 * time.Second
	for _, tc := range []struct {
		name        string
		until, want time.Duration
	}{
		{"just renewed: come back with 5 s of the Lease left", 15 * time.Second, 10 * time.Second},
		{"renewed 4 s ago", 11 * time.Second, 6 * time.Second},
		{"no newer renewal inside the last third: come back to fence at the deadline", 4 * time.Second, 4 * time.Second},
		{"exactly a third left", 5 * time.Second, 5 * time.Second},
		{"deadline passed: look again soon", -time.Second, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lookAfter(tc.until, fenceAfter, 0); got != tc.want {
				t.Errorf("lookAfter(%s, %s, 0) = %s, want %s", tc.until, fenceAfter, got, tc.want)
			}
		})
	}
}

// With the heartbeat known, the Lease is rewritten as soon as a fresher renewal can exist, so the
// instance manager (which fences contract.FenceSafety before the end) always sees most of it left:
// at the defaults one heartbeat after the carried renewal, and with a short fenceAfter never a
// third of it (2.7 s of 8 s, which fenced healthy primaries on real nodes).
func TestLookAfterCarriesEachRenewalWithinAHeartbeat(t *testing.T) {
	for _, tc := range []struct {
		name                         string
		fenceAfter, renewEvery, want time.Duration
	}{
		{"defaults: 15 s, heartbeat 5 s", 15 * time.Second, 5 * time.Second, 5 * time.Second},
		{"short: 8 s, heartbeat 1 s", 8 * time.Second, time.Second, time.Second},
		{"shortest: 3 s, heartbeat 1 s", 3 * time.Second, time.Second, time.Second},
		{"heartbeat unknown, 8 s: leaseInHand", 8 * time.Second, 0, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := lookAfter(tc.fenceAfter, tc.fenceAfter, tc.renewEvery) // just renewed
			if got != tc.want {
				t.Errorf("lookAfter(%s, %s, %s) = %s, want %s", tc.fenceAfter, tc.fenceAfter, tc.renewEvery, got, tc.want)
			}
			if left := tc.fenceAfter - got; tc.fenceAfter >= 8*time.Second && left < contract.FenceSafety+3*time.Second {
				t.Errorf("the Lease is rewritten with %s left: the instance manager fences at %s left", left, contract.FenceSafety)
			}
		})
	}
	// No newer renewal within the last keep: the next look is the deadline, to fence.
	if got := lookAfter(2*time.Second, 8*time.Second, time.Second); got != 2*time.Second {
		t.Errorf("lookAfter(2s, 8s, 1s) = %s, want the deadline, 2s", got)
	}
}

// A share comes back when something needs looking at: a lapse to judge, a StatefulSet being
// replaced, instances that nothing watches (sooner while the share is on its way somewhere, and
// soonest during a handover); otherwise only when a watch event brings it.
func TestNextPass(t *testing.T) {
	available := func(mdb *dbfleetv1alpha1.MemberDatabase) {
		meta.SetStatusCondition(&mdb.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "Test"})
	}
	promoting := []dbfleetv1alpha1.InstanceStatus{{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningStandby}}
	for _, tc := range []struct {
		name      string
		pass      passResult
		available bool
		lapseWait time.Duration
		want      time.Duration
	}{
		{name: "nothing to look at", available: true, want: 0},
		{name: "a lapse to judge", lapseWait: 3 * time.Second, want: 3 * time.Second},
		{name: "a StatefulSet being replaced", pass: passResult{replacing: true}, want: replaceWait},
		{name: "instances, available", pass: passResult{instanceManaged: true}, available: true, want: instanceRecheck},
		{name: "instances, on the way", pass: passResult{instanceManaged: true}, want: instanceSettleRecheck},
		{name: "instances, a standby promoting", pass: passResult{instanceManaged: true, instances: promoting}, want: instanceHandoverRecheck},
		{name: "a lapse to judge before the instances' next read", pass: passResult{instanceManaged: true}, available: true, lapseWait: time.Second, want: time.Second},
	} {
		mdb := &dbfleetv1alpha1.MemberDatabase{Spec: dbfleetv1alpha1.MemberDatabaseSpec{Role: dbfleetv1alpha1.RolePrimary}}
		if tc.available {
			available(mdb)
		}
		if got := (&Reconciler{}).nextPass(mdb, tc.pass, false, tc.lapseWait); got != tc.want {
			t.Errorf("%s: next pass in %s, want %s", tc.name, got, tc.want)
		}
	}
}

// The manager's controller options reach the member reconciler, which multicluster-runtime's
// builder does not see to: --concurrent-reconciles and the reconcile deadline. Options given
// for the reconciler itself win.
func TestWithManagerDefaults(t *testing.T) {
	global := config.Controller{MaxConcurrentReconciles: 4, ReconciliationTimeout: time.Minute}
	got := withManagerDefaults(controller.TypedOptions[mcreconcile.Request]{}, global)
	if got.MaxConcurrentReconciles != 4 || got.ReconciliationTimeout != time.Minute {
		t.Errorf("from the manager: %d workers, deadline %s; want 4, 1m", got.MaxConcurrentReconciles, got.ReconciliationTimeout)
	}
	got = withManagerDefaults(controller.TypedOptions[mcreconcile.Request]{MaxConcurrentReconciles: 2, ReconciliationTimeout: time.Second}, global)
	if got.MaxConcurrentReconciles != 2 || got.ReconciliationTimeout != time.Second {
		t.Errorf("given: %d workers, deadline %s; want 2, 1s", got.MaxConcurrentReconciles, got.ReconciliationTimeout)
	}
}
