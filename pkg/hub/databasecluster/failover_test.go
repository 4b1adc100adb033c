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
	if wait, reason, msg := r.failoverGate(ctx, dbc, old, share{}, "east"); wait != need || reason != dbfleetv1alpha1.ReasonWaitingForFencing {
		t.Fatalf("with a renewal the watch had not delivered: wait %s, reason %q (%s); want %s, %s", wait, reason, msg, need, dbfleetv1alpha1.ReasonWaitingForFencing)
	}

	// The Lease cannot be read: the silence is not confirmed, so no promotion.
	clock.Step(need + time.Second)
	readErr = errors.New("the server is currently unable to handle the request")
	if wait, reason, msg := r.failoverGate(ctx, dbc, old, share{}, "east"); wait == 0 || reason != dbfleetv1alpha1.ReasonWaitingForFencing {
		t.Fatalf("with the Lease unreadable: wait %s, reason %q (%s); want a wait, %s", wait, reason, msg, dbfleetv1alpha1.ReasonWaitingForFencing)
	}

	// Confirmed: no renewal since; the agent has fenced itself.
	readErr = nil
	if wait, reason, msg := r.failoverGate(ctx, dbc, old, share{}, "east"); wait != 0 {
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
	memberDB := func(spec, status int64, reason string) *dbfleetv1alpha1.MemberDatabase {
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
		{"lapsed at the current epoch", memberDB(4, 4, dbfleetv1alpha1.ReasonPrimaryLeaseLapsed), true},
		{"lapsed at an older epoch", memberDB(4, 3, dbfleetv1alpha1.ReasonPrimaryLeaseLapsed), false},
		{"fenced for another reason", memberDB(4, 4, dbfleetv1alpha1.ReasonHubLeaseExpired), false},
		{"no share", nil, false},
	} {
		wait, reason, msg := r.failoverGate(ctx, dbc, old, shareOf(tc.share), "east")
		if (wait == 0) != tc.go_ {
			t.Errorf("%s: wait %s, reason %q (%s); want go ahead %t", tc.name, wait, reason, msg, tc.go_)
		}
	}
}

// The demotion token is the old primary's final LSN at the epoch it was primary: the furthest an
// instance of its share reports; a share without instance reports has none to wait for; an older
// epoch's record, or a primary that stopped without a shutdown checkpoint, is no token.
func TestFinalLSN(t *testing.T) {
	memberDB := func(instances ...dbfleetv1alpha1.InstanceStatus) *dbfleetv1alpha1.MemberDatabase {
		return &dbfleetv1alpha1.MemberDatabase{Status: dbfleetv1alpha1.MemberDatabaseStatus{Instances: instances}}
	}
	demoted := func(pod string, epoch int64, lsn, msg string) dbfleetv1alpha1.InstanceStatus {
		return dbfleetv1alpha1.InstanceStatus{Pod: pod, Role: dbfleetv1alpha1.InstanceFenced,
			Demoted: &dbfleetv1alpha1.InstanceDemotion{Epoch: epoch, FinalLSN: lsn, Message: msg}}
	}
	standby := dbfleetv1alpha1.InstanceStatus{Pod: "orders-1", Role: dbfleetv1alpha1.InstanceRunningStandby}
	for _, tc := range []struct {
		name     string
		mdb      *dbfleetv1alpha1.MemberDatabase
		lsn      string
		waitsFor []string
	}{
		{name: "no share", mdb: nil},
		{name: "no instance manager", mdb: memberDB()},
		{name: "reported", mdb: memberDB(demoted("orders-0", 3, "0/30199A8", ""), standby), lsn: "0/30199A8"},
		{name: "the furthest, as numbers", mdb: memberDB(demoted("orders-0", 3, "0/F0000A8", ""), demoted("orders-1", 3, "1/28", "")), lsn: "1/28"},
		{name: "not stopped yet", mdb: memberDB(dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningPrimary}, standby),
			waitsFor: []string{"final LSN"}},
		{name: "an older epoch's demotion", mdb: memberDB(demoted("orders-0", 2, "0/20000A8", ""), standby), waitsFor: []string{"final LSN"}},
		{name: "stopped without a shutdown checkpoint", mdb: memberDB(demoted("orders-0", 3, "", "postgres did not stop cleanly")),
			waitsFor: []string{"final LSN", "orders-0: postgres did not stop cleanly"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lsn, waiting := shareOf(tc.mdb).finalLSN(3)
			if lsn != tc.lsn {
				t.Errorf("final LSN %q, want %q", lsn, tc.lsn)
			}
			if (waiting != "") != (len(tc.waitsFor) > 0) {
				t.Errorf("waiting %q, want a wait: %v", waiting, len(tc.waitsFor) > 0)
			}
			for _, part := range tc.waitsFor {
				if !strings.Contains(waiting, part) {
					t.Errorf("waiting %q does not say %q", waiting, part)
				}
			}
		})
	}
}
