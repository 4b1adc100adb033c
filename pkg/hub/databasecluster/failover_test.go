package databasecluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub/liveness"
)

// The failover gate promotes away from a cluster only once the API server confirms that its agent
// has not renewed for fenceAfter + FencingMargin: a hub whose Lease watch fell behind has not
// heard renewals the agent made, and promoting then would leave two primaries.
func TestFailoverGatePromotesOnlyOnConfirmedSilence(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	obs := liveness.NewObserver(clock)
	apiRenewTime, readErr := clock.Now(), error(nil)
	obs.SetReader(func(context.Context, string) (time.Time, bool, error) { return apiRenewTime, true, readErr })
	obs.Observe("east", apiRenewTime)
	r := &Reconciler{Liveness: obs}
	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	old := &dbfleetv1alpha1.MemberCluster{Status: dbfleetv1alpha1.MemberClusterStatus{
		Agent: &dbfleetv1alpha1.AgentSettings{FenceAfterSeconds: 15}}}
	ctx := context.Background()
	const need = 15*time.Second + FencingMargin

	// The hub heard nothing for longer than needed, but the agent renewed 2 s ago.
	clock.Step(need + time.Second)
	apiRenewTime = clock.Now().Add(-2 * time.Second)
	if wait, reason, msg := r.failoverGate(ctx, dbc, old, nil, "east"); wait != need || reason != dbfleetv1alpha1.ReasonWaitingForFencing {
		t.Fatalf("with a renewal the watch had not delivered: wait %s, reason %q (%s); want %s, %s", wait, reason, msg, need, dbfleetv1alpha1.ReasonWaitingForFencing)
	}

	// The Lease cannot be read: the silence is not confirmed, so no promotion.
	clock.Step(need + time.Second)
	readErr = errors.New("the server is currently unable to handle the request")
	if wait, reason, msg := r.failoverGate(ctx, dbc, old, nil, "east"); wait == 0 || reason != dbfleetv1alpha1.ReasonWaitingForFencing {
		t.Fatalf("with the Lease unreadable: wait %s, reason %q (%s); want a wait, %s", wait, reason, msg, dbfleetv1alpha1.ReasonWaitingForFencing)
	}

	// Confirmed: no renewal since; the agent has fenced itself.
	readErr = nil
	if wait, reason, msg := r.failoverGate(ctx, dbc, old, nil, "east"); wait != 0 {
		t.Fatalf("with the silence confirmed: wait %s, reason %q (%s); want to go ahead", wait, reason, msg)
	}
}

// Without the hub's own observations the gate cannot know when an agent has fenced: the
// controller refuses to start rather than guess from status timestamps.
func TestTheControllerNeedsTheLivenessObserver(t *testing.T) {
	err := (&Reconciler{}).SetupWithManager(nil)
	if err == nil || !strings.Contains(err.Error(), "liveness observer") {
		t.Errorf("SetupWithManager without Liveness: %v, want a refusal naming the liveness observer", err)
	}
}

// An agent that still heartbeats but says its primary Lease ran out unrenewed at the current
// epoch (its member API server is down) lets the hub promote without a silence; the same report
// at an older epoch, or without the epoch applied, does not.
func TestFailoverGateGoesAheadOnALapsedPrimaryLease(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	obs := liveness.NewObserver(clock)
	obs.SetReader(func(context.Context, string) (time.Time, bool, error) { return clock.Now(), true, nil })
	obs.Observe("east", clock.Now())
	r := &Reconciler{Liveness: obs}
	dbc := &dbfleetv1alpha1.DatabaseCluster{Status: dbfleetv1alpha1.DatabaseClusterStatus{
		Primary: &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Epoch: 4}}}
	old := &dbfleetv1alpha1.MemberCluster{}
	share := func(spec, status int64, reason string) *dbfleetv1alpha1.MemberDatabase {
		m := &dbfleetv1alpha1.MemberDatabase{}
		m.Spec.Role, m.Spec.Epoch, m.Status.Epoch = dbfleetv1alpha1.RolePrimary, spec, status
		m.Status.Conditions = []metav1.Condition{{Type: dbfleetv1alpha1.ConditionFenced, Status: metav1.ConditionTrue, Reason: reason}}
		return m
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		share *dbfleetv1alpha1.MemberDatabase
		go_   bool
	}{
		{"lapsed at the current epoch", share(4, 4, dbfleetv1alpha1.ReasonPrimaryLeaseLapsed), true},
		{"lapsed at an older epoch", share(4, 3, dbfleetv1alpha1.ReasonPrimaryLeaseLapsed), false},
		{"fenced for another reason", share(4, 4, dbfleetv1alpha1.ReasonHubLeaseExpired), false},
		{"no share", nil, false},
	} {
		wait, reason, msg := r.failoverGate(ctx, dbc, old, tc.share, "east")
		if (wait == 0) != tc.go_ {
			t.Errorf("%s: wait %s, reason %q (%s); want go ahead %t", tc.name, wait, reason, msg, tc.go_)
		}
	}
}
