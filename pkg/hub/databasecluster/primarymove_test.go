package databasecluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// moveFixture is a database whose primary, pod orders-0 on east at epoch 3, moves to pod
// orders-5 on west at epoch 4; east's share is as the test writes it.
func moveFixture(east *dbfleetv1alpha1.MemberDatabase, west ...dbfleetv1alpha1.InstanceStatus) (*scope, *primaryMove) {
	since := metav1.NewTime(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	dbc := &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "orders"}}
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Pod: "orders-0", Epoch: 3, Since: &since}
	s := &scope{dbc: dbc, memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{
		"west": {Status: dbfleetv1alpha1.MemberDatabaseStatus{Instances: west}}}}
	if east != nil {
		s.memberDBs["east"] = east
	}
	return s, &primaryMove{from: "east", to: "west", current: dbc.Status.Primary, epoch: 4,
		promoted: primaryPodChoice{pod: "orders-5", ordinal: 5}}
}

// eastShare is east's MemberDatabase: its role and epoch as the hub wrote them, the epoch its
// agent applied, and its instances' reports.
func eastShare(role dbfleetv1alpha1.ReplicaRole, spec, applied int64, instances ...dbfleetv1alpha1.InstanceStatus) *dbfleetv1alpha1.MemberDatabase {
	return &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:   dbfleetv1alpha1.MemberDatabaseSpec{Role: role, Epoch: spec},
		Status: dbfleetv1alpha1.MemberDatabaseStatus{ObservedGeneration: 2, Epoch: applied, Instances: instances}}
}

var (
	runningPrimary = dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningPrimary, Epoch: 3, PromotedEpoch: 3, Ready: true}
	streaming      = dbfleetv1alpha1.InstanceStatus{Pod: "orders-5", Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 3, Ready: true}
	notStreaming   = dbfleetv1alpha1.InstanceStatus{Pod: "orders-5", Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 3}
)

func stoppedAt(lsn string) dbfleetv1alpha1.InstanceStatus {
	return dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceFenced, Epoch: 4, PromotedEpoch: 3,
		Demoted: &dbfleetv1alpha1.InstanceDemotion{Epoch: 3, FinalLSN: lsn}}
}

// checkHold compares a step's hold with the one wanted: nil, or its reason (or pending) and
// fragments of its message.
func checkHold(t *testing.T, h *hold, reason string, demote bool, says ...string) {
	t.Helper()
	if reason == "" {
		if h != nil {
			t.Fatalf("held: %+v, want the move to go on", *h)
		}
		return
	}
	if h == nil {
		t.Fatalf("the move goes on, want a hold %s", reason)
	}
	got, msg := h.reason, h.message
	if reason == dbfleetv1alpha1.ReasonSwitchoverPending {
		got, msg = reason, h.pending
		if h.reason != "" {
			t.Errorf("a switchover not begun holds FailoverInProgress %s; it must leave it alone", h.reason)
		}
	}
	if got != reason || h.demote != demote {
		t.Errorf("hold %s (demote %t), want %s (demote %t): %q", got, h.demote, reason, demote, msg)
	}
	for _, part := range says {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q does not say %q", msg, part)
		}
	}
}

// A planned switchover does not stop a running primary for a target that does not stream; once
// the demotion has begun, or when the primary cannot stay, nothing holds it at this step.
func TestSwitchoverMayBegin(t *testing.T) {
	now := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		east   *dbfleetv1alpha1.MemberDatabase
		west   dbfleetv1alpha1.InstanceStatus
		forced bool
		want   string
	}{
		{"the target streams", eastShare(dbfleetv1alpha1.RolePrimary, 3, 3, runningPrimary), streaming, false, ""},
		{"the target does not stream", eastShare(dbfleetv1alpha1.RolePrimary, 3, 3, runningPrimary), notStreaming, false, dbfleetv1alpha1.ReasonSwitchoverPending},
		{"the demotion has begun", eastShare(dbfleetv1alpha1.RoleReplica, 4, 3, runningPrimary), notStreaming, false, ""},
		{"the primary cannot stay", eastShare(dbfleetv1alpha1.RolePrimary, 3, 3, runningPrimary), notStreaming, true, ""},
		{"no primary runs to be stopped", eastShare(dbfleetv1alpha1.RolePrimary, 3, 3), notStreaming, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := moveFixture(tc.east, tc.west)
			m.forced = tc.forced
			checkHold(t, m.switchoverMayBegin(s, now), tc.want, false, "orders-5 streams from the primary")
		})
	}
}

// Nothing is promoted until the old primary's agent has applied the replica role at the new
// epoch; the hold writes the demotion meanwhile and says why the primary leaves when it must.
func TestDemoteFirst(t *testing.T) {
	for _, tc := range []struct {
		name string
		east *dbfleetv1alpha1.MemberDatabase
		want string
	}{
		{"not yet written", eastShare(dbfleetv1alpha1.RolePrimary, 3, 3), dbfleetv1alpha1.ReasonDemoting},
		{"written, not applied", eastShare(dbfleetv1alpha1.RoleReplica, 4, 3), dbfleetv1alpha1.ReasonDemoting},
		{"applied", eastShare(dbfleetv1alpha1.RoleReplica, 4, 4), ""},
		{"no share left to demote", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := moveFixture(tc.east)
			m.forced, m.forcedBy = true, "its clocks disagree"
			checkHold(t, m.demoteFirst(s), tc.want, true, "demoting the primary on east (epoch 4) (it cannot stay there: its clocks disagree) before promoting west")
		})
	}
}

// The new primary replays past the old one's final LSN: the move waits for it, takes it, or
// takes the token a target that never promoted was handed.
func TestHandOverToken(t *testing.T) {
	unpromoted := dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 4, PromotedEpoch: 1}
	for _, tc := range []struct {
		name        string
		east        *dbfleetv1alpha1.MemberDatabase
		token       string // on the current primary (it was a switchover's target)
		stuck       bool
		want        string
		lsn, source string
		retry       bool
	}{
		{name: "reported", east: eastShare(dbfleetv1alpha1.RoleReplica, 4, 4, stoppedAt("0/30199A8")), lsn: "0/30199A8"},
		{name: "not reported yet", east: eastShare(dbfleetv1alpha1.RoleReplica, 4, 4, dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceStopped}),
			want: dbfleetv1alpha1.ReasonDemoting},
		{name: "no instance manager: no WAL to hand over", east: eastShare(dbfleetv1alpha1.RoleReplica, 4, 4)},
		{name: "a target that never promoted hands on its token", east: eastShare(dbfleetv1alpha1.RoleReplica, 4, 4, unpromoted), token: "0/2000000",
			lsn: "0/2000000", source: "handed on: east never ran as primary at epoch 3"},
		{name: "and a stuck one's switchover is asked again", east: eastShare(dbfleetv1alpha1.RoleReplica, 4, 4, unpromoted), token: "0/2000000", stuck: true,
			lsn: "0/2000000", source: "handed on", retry: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := moveFixture(tc.east)
			m.current.PromoteAfterLSN, m.stuckTarget = tc.token, tc.stuck
			checkHold(t, m.handOverToken(s), tc.want, true, "the primary on east stepped down at epoch 4", "final LSN", "before promoting west")
			if tc.want != "" {
				return
			}
			if m.token != tc.lsn || !strings.Contains(m.tokenSource, tc.source) || m.retrySwitchover != tc.retry {
				t.Errorf("token %q from %q, retry %t; want %q from %q, retry %t", m.token, m.tokenSource, m.retrySwitchover, tc.lsn, tc.source, tc.retry)
			}
			planned := s.dbc.DeepCopy()
			planned.Status.Primary.Preferred = "west"
			m.applyTo(planned)
			if planned.Status.Primary.PromoteAfterLSN != tc.lsn || (planned.Status.Primary.Preferred == "") != tc.retry {
				t.Errorf("applied: promoteAfterLSN %q, preferred %q", planned.Status.Primary.PromoteAfterLSN, planned.Status.Primary.Preferred)
			}
			if d := m.describeToken(); (d == "") != (tc.lsn == "") {
				t.Errorf("the token is described as %q", d)
			}
		})
	}
}

// With dataDurability required a failover waits until the target has every acknowledged commit;
// without it, this step holds nothing.
func TestSynchronousFirst(t *testing.T) {
	s, m := moveFixture(eastShare(dbfleetv1alpha1.RolePrimary, 3, 3))
	checkHold(t, m.synchronousFirst(s), "", false)
	s.dbc.Spec.Engine = dbfleetv1alpha1.EnginePostgres
	s.dbc.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: &dbfleetv1alpha1.SynchronousReplication{Number: 1,
		DataDurability: dbfleetv1alpha1.DataDurabilityRequired}}
	h := m.synchronousFirst(s)
	checkHold(t, h, dbfleetv1alpha1.ReasonWaitingForSynchronousStandby, false)
	if h != nil && h.wait != synchronousRecheck {
		t.Errorf("looked at again in %s, want %s", h.wait, synchronousRecheck)
	}
}

// The steps a move takes follow the old primary's cluster: Ready, a planned move; not Ready and
// still placed, the eviction; evicted, the fencing.
func TestGateTakesTheStepsOfItsKindOfMove(t *testing.T) {
	cluster := func(ready bool) *dbfleetv1alpha1.MemberCluster {
		mc := &dbfleetv1alpha1.MemberCluster{}
		status := metav1.ConditionFalse
		if ready {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionReady, Status: status, Reason: "Test"})
		return mc
	}
	for _, tc := range []struct {
		name         string
		ready, still bool
		want         string
	}{
		{"Ready: demoted first", true, true, dbfleetv1alpha1.ReasonDemoting},
		{"Ready, still tainted unreachable: nothing demoted", true, true, dbfleetv1alpha1.ReasonClusterReturning},
		{"not Ready, still placed: the eviction", false, true, dbfleetv1alpha1.ReasonWaitingForEviction},
		{"not Ready, evicted, failover Manual: the person", false, false, dbfleetv1alpha1.ReasonManualFailoverRequired},
		{"Ready, its primary pod lost: a failover's steps, nothing demoted", true, true, dbfleetv1alpha1.ReasonManualFailoverRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, m := moveFixture(eastShare(dbfleetv1alpha1.RolePrimary, 3, 3), streaming)
			if strings.Contains(tc.name, "lost") {
				meta.SetStatusCondition(&s.memberDBs["east"].Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionFenced,
					Status: metav1.ConditionTrue, Reason: dbfleetv1alpha1.ReasonPrimaryLost})
			}
			s.members = map[string]*dbfleetv1alpha1.MemberCluster{"east": cluster(tc.ready), "west": cluster(true)}
			if strings.Contains(tc.name, "tainted") {
				s.members["east"].Spec.Taints = []corev1.Taint{{Key: dbfleetv1alpha1.TaintClusterUnreachable, Effect: corev1.TaintEffectNoExecute}}
			}
			s.dbc.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{Failover: dbfleetv1alpha1.FailoverManual}
			planned := s.dbc.DeepCopy()
			planned.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{{Cluster: "west", Replicas: 1}}
			if tc.still {
				planned.Status.Placements = append(planned.Status.Placements, dbfleetv1alpha1.ClusterPlacement{Cluster: "east", Replicas: 1})
			}
			h := (&Reconciler{}).gate(context.Background(), s, m, planned, time.Now())
			if tc.want == dbfleetv1alpha1.ReasonClusterReturning {
				checkHold(t, h, tc.want, false, "Ready again but still tainted")
				return
			}
			if h == nil || h.reason != tc.want {
				t.Fatalf("hold %+v, want %s", h, tc.want)
			}
		})
	}
}
