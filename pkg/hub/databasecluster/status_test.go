package databasecluster

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func mdb(gen, observed, epoch, reportedEpoch int64, ready int32, conds ...string) *dbfleetv1alpha1.MemberDatabase {
	m := &dbfleetv1alpha1.MemberDatabase{}
	m.Generation, m.Spec.Epoch = gen, epoch
	m.Status.ObservedGeneration, m.Status.Epoch, m.Status.ReadyReplicas = observed, reportedEpoch, ready
	for _, c := range conds {
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue, Reason: "Test"})
	}
	return m
}

func TestShareState(t *testing.T) {
	placed := dbfleetv1alpha1.ClusterPlacement{Cluster: "east", Replicas: 3}
	for _, tc := range []struct {
		name      string
		view      shareView
		wantState dbfleetv1alpha1.PlacementState
		wantReady int32
	}{
		{"silent agent hides what it said", shareView{placement: placed, mdb: mdb(1, 1, 1, 1, 3, "Available"), reachable: false},
			dbfleetv1alpha1.PlacementUnknown, 0},
		{"not written yet", shareView{placement: placed, reachable: true}, dbfleetv1alpha1.PlacementPending, 0},
		{"never reported", shareView{placement: placed, mdb: mdb(1, 0, 1, 0, 0), reachable: true}, dbfleetv1alpha1.PlacementPending, 0},
		{"old generation", shareView{placement: placed, mdb: mdb(2, 1, 1, 1, 3, "Available"), reachable: true},
			dbfleetv1alpha1.PlacementProgressing, 3},
		{"old epoch", shareView{placement: placed, mdb: mdb(1, 1, 2, 1, 3, "Available"), reachable: true},
			dbfleetv1alpha1.PlacementProgressing, 3},
		{"fenced", shareView{placement: placed, mdb: mdb(1, 1, 1, 1, 3, "Available", "Fenced"), reachable: true},
			dbfleetv1alpha1.PlacementDegraded, 3},
		{"degraded", shareView{placement: placed, mdb: mdb(1, 1, 1, 1, 1, "Degraded"), reachable: true},
			dbfleetv1alpha1.PlacementDegraded, 1},
		{"partly ready", shareView{placement: placed, mdb: mdb(1, 1, 1, 1, 2), reachable: true},
			dbfleetv1alpha1.PlacementProgressing, 2},
		{"available", shareView{placement: placed, mdb: mdb(1, 1, 1, 1, 3, "Available"), reachable: true},
			dbfleetv1alpha1.PlacementAvailable, 3},
		{"more ready than placed counts the placement", shareView{placement: placed, mdb: mdb(1, 1, 1, 1, 5, "Available"), reachable: true},
			dbfleetv1alpha1.PlacementAvailable, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, ready := shareState(tc.view)
			if state != tc.wantState || ready != tc.wantReady {
				t.Errorf("shareState = %s, %d; want %s, %d", state, ready, tc.wantState, tc.wantReady)
			}
		})
	}
}

// wantCondition is a condition's status, reason and a part of its message.
type wantCondition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

func checkCondition(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster, conditionType string, want wantCondition) {
	t.Helper()
	c := meta.FindStatusCondition(dbc.Status.Conditions, conditionType)
	if c == nil {
		t.Fatalf("no %s condition", conditionType)
	}
	if c.Status != want.status || c.Reason != want.reason || !strings.Contains(c.Message, want.message) {
		t.Errorf("%s = %s/%s %q, want %s/%s containing %q", conditionType, c.Status, c.Reason, c.Message, want.status, want.reason, want.message)
	}
	if c.ObservedGeneration != dbc.Generation {
		t.Errorf("%s observedGeneration %d, want %d", conditionType, c.ObservedGeneration, dbc.Generation)
	}
}

func dbAt(generation int64, conditions ...metav1.Condition) *dbfleetv1alpha1.DatabaseCluster {
	dbc := newDB(5) // a majority is 3
	dbc.Generation = generation
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Epoch: 2}
	dbc.Status.Conditions = conditions
	return dbc
}

func TestSetPropagatedCondition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shares shares
		want   wantCondition
	}{
		{"nothing placed", shares{}, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonNotScheduled, "nothing is placed"}},
		{"a write failed", shares{placed: 2, failed: []string{"west: namespace member-west does not exist"}},
			wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonPropagationFailed, "west: namespace member-west"}},
		{"all written", shares{placed: 2}, wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonAllPropagated, "2 clusters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := dbAt(3)
			setPropagatedCondition(dbc, tc.shares)
			checkCondition(t, dbc, dbfleetv1alpha1.ConditionPropagated, tc.want)
		})
	}
}

func TestSetAvailableCondition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shares shares
		want   wantCondition
	}{
		{"no primary", shares{}, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonNotScheduled, "no primary"}},
		{"primary's agent silent", shares{primaryCluster: "east", primaryState: dbfleetv1alpha1.PlacementUnknown, ready: 3},
			wantCondition{metav1.ConditionUnknown, dbfleetv1alpha1.ReasonPrimaryClusterUnknown, "east is silent"}},
		{"majority without primary", shares{primaryCluster: "east", primaryState: dbfleetv1alpha1.PlacementProgressing, ready: 3},
			wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonPrimaryNotReady, "east is not ready"}},
		{"primary without majority", shares{primaryCluster: "east", primaryState: dbfleetv1alpha1.PlacementAvailable, primaryReady: true, ready: 2},
			wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonTooFewReplicasReady, "2 of 5 replicas ready, 3 needed"}},
		{"primary and majority", shares{primaryCluster: "east", primaryState: dbfleetv1alpha1.PlacementAvailable, primaryReady: true, ready: 3},
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonPrimaryReady, "3 of 5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := dbAt(3)
			setAvailableCondition(dbc, tc.shares)
			checkCondition(t, dbc, dbfleetv1alpha1.ConditionAvailable, tc.want)
		})
	}
}

func TestSetProgressingCondition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shares shares
		roll   string
		want   wantCondition
	}{
		{"a version roll comes first", shares{progressing: []string{"west (1/2 ready)"}}, "rolling from 16.4 to 16.5, standbys first: updating the share on west",
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingVersion, "updating the share on west"}},
		{"rolling out, evicted kept", shares{progressing: []string{"west (1/2 ready)"}, evicting: []string{"east (1/1 ready, ClusterFailure)"}}, "",
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingOut, "west (1/2 ready); evicted shares kept until then: east"}},
		{"evicted kept", shares{evicting: []string{"east (1/1 ready, Migration)"}}, "",
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonEvictingShares, "east (1/1 ready, Migration)"}},
		{"up to date", shares{placed: 2}, "", wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonUpToDate, "up to date"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := dbAt(3)
			setProgressingCondition(dbc, tc.shares, tc.roll)
			checkCondition(t, dbc, dbfleetv1alpha1.ConditionProgressing, tc.want)
		})
	}
}

func TestSetDegradedCondition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shares shares
		want   wantCondition
	}{
		{"silent and degraded", shares{unknown: []string{"east"}, degraded: []string{"west (0/2 ready)"}},
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonSharesUnknown, "agents silent: east; degraded: west (0/2 ready)"}},
		{"degraded", shares{degraded: []string{"west (0/2 ready)"}},
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonSharesDegraded, "west (0/2 ready)"}},
		{"healthy", shares{}, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonHealthy, "no share"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := dbAt(3)
			setDegradedCondition(dbc, tc.shares)
			checkCondition(t, dbc, dbfleetv1alpha1.ConditionDegraded, tc.want)
		})
	}
}

func TestSetFailoverInProgressCondition(t *testing.T) {
	was := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: dbfleetv1alpha1.ConditionFailoverInProgress, Status: status, Reason: reason,
			Message: "before", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0)}
	}
	pending := "the switchover to west (spec.primary.preferredClusters[0]) waits until it can take the primary: it holds no replica"
	for _, tc := range []struct {
		name         string
		before       []metav1.Condition
		facts        failoverFacts
		primaryReady bool
		want         wantCondition
	}{
		{"first look", nil, failoverFacts{}, true, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonNoFailover, "not moving"}},
		{"a move held", []metav1.Condition{was(metav1.ConditionFalse, dbfleetv1alpha1.ReasonNoFailover)},
			failoverFacts{heldReason: dbfleetv1alpha1.ReasonWaitingForFencing, heldMessage: "fencing"}, true,
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForFencing, "fencing"}},
		{"held for another reason", []metav1.Condition{was(metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForEviction)},
			failoverFacts{heldReason: dbfleetv1alpha1.ReasonEvictionRateLimited, heldMessage: "rate"}, true,
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonEvictionRateLimited, "rate"}},
		{"a hold wins over a pending switchover", nil,
			failoverFacts{heldReason: dbfleetv1alpha1.ReasonDemoting, heldMessage: "demoting", pendingSwitchover: pending}, true,
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonDemoting, "demoting"}},
		{"promoted now", []metav1.Condition{was(metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForFencing)},
			failoverFacts{promoted: "primary moved from west to east at epoch 2"}, false,
			wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonPromoted, "from west to east"}},
		{"promoted, not ready yet", []metav1.Condition{was(metav1.ConditionTrue, dbfleetv1alpha1.ReasonPromoted)},
			failoverFacts{pendingSwitchover: pending}, false, wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonPromoted, "before"}},
		{"promoted and ready", []metav1.Condition{was(metav1.ConditionTrue, dbfleetv1alpha1.ReasonPromoted)}, failoverFacts{}, true,
			wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverComplete, "east is ready at epoch 2"}},
		// The primary's cluster came back while the hub waited: nothing holds the move any more.
		{"a held move no longer called for", []metav1.Condition{was(metav1.ConditionTrue, dbfleetv1alpha1.ReasonWaitingForFencing)},
			failoverFacts{}, true,
			wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverCanceled, "stays on east at epoch 2: the move that waited (WaitingForFencing)"}},
		{"a manual failover no longer needed", []metav1.Condition{was(metav1.ConditionTrue, dbfleetv1alpha1.ReasonManualFailoverRequired)},
			failoverFacts{}, false,
			wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverCanceled, "(ManualFailoverRequired)"}},
		{"a switchover that cannot happen", []metav1.Condition{was(metav1.ConditionFalse, dbfleetv1alpha1.ReasonNoFailover)},
			failoverFacts{pendingSwitchover: pending}, true, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonSwitchoverPending, pending}},
		{"the pending switchover withdrawn", []metav1.Condition{was(metav1.ConditionFalse, dbfleetv1alpha1.ReasonSwitchoverPending)},
			failoverFacts{}, true, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonNoFailover, "not moving"}},
		{"a completed failover stays reported", []metav1.Condition{was(metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverComplete)},
			failoverFacts{}, true, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonFailoverComplete, "before"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := dbAt(3, slices.Clone(tc.before)...)
			setFailoverInProgressCondition(dbc, tc.facts, tc.primaryReady)
			checkCondition(t, dbc, dbfleetv1alpha1.ConditionFailoverInProgress, tc.want)
			c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress)
			if len(tc.before) > 0 && c.Status == tc.before[0].Status && !c.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("lastTransitionTime moved to %s without a change of status", c.LastTransitionTime)
			}
		})
	}
}

// updateStatus judges the shares (the primary's readiness among them) and sets every condition.
func TestUpdateStatus(t *testing.T) {
	dbc := newDB(5)
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Epoch: 1}
	dbc.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{
		{Cluster: "east", Replicas: 2, Role: dbfleetv1alpha1.RolePrimary},
		{Cluster: "west", Replicas: 3, Role: dbfleetv1alpha1.RoleReplica},
	}
	dbc.Status.Evictions = []dbfleetv1alpha1.Eviction{{Cluster: "north", Replicas: 1, Reason: dbfleetv1alpha1.EvictionMigration}}
	s := &scope{
		dbc:     dbc,
		members: fleet("east", "west", "north"),
		memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{
			"east":  mdb(1, 1, 1, 1, 2, "Available"),
			"west":  mdb(1, 1, 1, 1, 1),
			"north": mdb(1, 1, 1, 1, 1, "Available"),
		},
		propagationErrors: map[string]error{"west": errors.New("conflict")},
	}
	updateStatus(s)
	if dbc.Status.Replicas != 5 || dbc.Status.ReadyReplicas != 3 || dbc.Status.Ready != "3/5" || dbc.Status.Evictions[0].ReadyReplicas != 1 {
		t.Errorf("replicas %d ready %d (%s), evicted ready %d; want 5, 3, 3/5, 1",
			dbc.Status.Replicas, dbc.Status.ReadyReplicas, dbc.Status.Ready, dbc.Status.Evictions[0].ReadyReplicas)
	}
	if got := dbc.Status.Placements[0].State; got != dbfleetv1alpha1.PlacementAvailable {
		t.Errorf("east's state %s, want Available", got)
	}
	checkCondition(t, dbc, dbfleetv1alpha1.ConditionAvailable, wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonPrimaryReady, "east"})
	checkCondition(t, dbc, dbfleetv1alpha1.ConditionPropagated, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonPropagationFailed, "west: conflict"})
	checkCondition(t, dbc, dbfleetv1alpha1.ConditionProgressing, wantCondition{metav1.ConditionTrue, dbfleetv1alpha1.ReasonRollingOut, "west (1/3 ready); evicted shares kept until then: north"})
	checkCondition(t, dbc, dbfleetv1alpha1.ConditionDegraded, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonHealthy, ""})
	checkCondition(t, dbc, dbfleetv1alpha1.ConditionFailoverInProgress, wantCondition{metav1.ConditionFalse, dbfleetv1alpha1.ReasonNoFailover, ""})
}

// A promoted pod whose instance still runs as a standby (replaying up to its promotion token) is
// not a ready primary, however Ready its pod is; once it reports itself primary at the epoch, it is.
func TestPrimaryReadyWaitsForTheInstanceToRunAsPrimary(t *testing.T) {
	for _, tc := range []struct {
		name     string
		instance *dbfleetv1alpha1.InstanceStatus
		want     bool
	}{
		{"no instance report", nil, true},
		{"standby replaying up to its token", &dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 2}, false},
		{"primary from the epoch before", &dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningPrimary, Epoch: 1}, false},
		{"primary at the epoch", &dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningPrimary, Epoch: 2}, true},
		{"only another pod's report", &dbfleetv1alpha1.InstanceStatus{Pod: "orders-1", Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := newDB(1)
			dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Epoch: 2, Pod: "orders-0"}
			dbc.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{{Cluster: "east", Replicas: 1, Role: dbfleetv1alpha1.RolePrimary}}
			east := mdb(1, 1, 2, 2, 1, "Available")
			if tc.instance != nil {
				east.Status.Instances = []dbfleetv1alpha1.InstanceStatus{*tc.instance}
			}
			s := &scope{dbc: dbc, members: fleet("east"), memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{"east": east}}
			if got := summarize(s).primaryReady; got != tc.want {
				t.Errorf("primaryReady %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTruncateKeepsEventNotesShort(t *testing.T) {
	if got := truncate(strings.Repeat("é", 800)); len(got) > 1024 || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate kept %d bytes", len(got))
	}
}

// A degraded share's cause reaches the DatabaseCluster: an image the member cannot pull is named
// in Degraded, not only "0/1 ready".
func TestDegradedNamesTheShareCause(t *testing.T) {
	broken := mdb(1, 1, 1, 1, 0)
	meta.SetStatusCondition(&broken.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionDegraded, Status: metav1.ConditionTrue,
		Reason: dbfleetv1alpha1.ReasonImagePullFailed, Message: `pod orders-0: container database cannot get image "postgres:99.1" (ErrImagePull)`})
	healthy := mdb(1, 1, 1, 1, 1, dbfleetv1alpha1.ConditionAvailable)
	meta.SetStatusCondition(&healthy.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "AsExpected"})
	ready := &dbfleetv1alpha1.MemberCluster{}
	meta.SetStatusCondition(&ready.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Test"})
	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	dbc.Spec.Replicas = 2
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "east"}
	dbc.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{{Cluster: "east", Replicas: 1}, {Cluster: "west", Replicas: 1}}
	s := &scope{dbc: dbc,
		members:   map[string]*dbfleetv1alpha1.MemberCluster{"east": ready, "west": ready},
		memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{"east": healthy, "west": broken}}
	setDegradedCondition(dbc, summarize(s))
	c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionDegraded)
	want := `degraded: west (0/1 ready, ImagePullFailed: pod orders-0: container database cannot get image "postgres:99.1" (ErrImagePull))`
	if c == nil || c.Status != metav1.ConditionTrue || c.Message != want {
		t.Errorf("Degraded = %+v, want True with message %q", c, want)
	}
}
