package databasecluster

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// lostFixture is database orders with its primary, orders-0 on east at epoch 3, reported lost
// (Fenced=True, PrimaryLost) unless fenced says otherwise; east holds orders-0..1, west
// orders-2. The instances' received LSNs are as given ("" for no report).
func lostFixture(fenced string, east1, west2 string) *scope {
	dbc := &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "orders"}}
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Pod: "orders-0", Epoch: 3, Preferred: "east"}
	dbc.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{
		{Cluster: "east", Replicas: 2, Role: dbfleetv1alpha1.RolePrimary, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 0, Count: 2}},
		{Cluster: "west", Replicas: 1, Role: dbfleetv1alpha1.RoleReplica, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 2, Count: 1}},
	}
	silent := ptr.To(promotionSilenceSeconds)
	standby := func(pod, lsn string) []dbfleetv1alpha1.InstanceStatus {
		if lsn == "" {
			return nil
		}
		return []dbfleetv1alpha1.InstanceStatus{{Pod: pod, Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 3, Ready: true,
			ReceivedLSN: lsn, ReplayedLSN: lsn, PrimarySilenceSeconds: silent}}
	}
	east := eastShare(dbfleetv1alpha1.RolePrimary, 3, 3, append([]dbfleetv1alpha1.InstanceStatus{
		{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceUnknown, Message: "connection refused"}}, standby("orders-1", east1)...)...)
	if fenced != "" {
		meta.SetStatusCondition(&east.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionFenced, Status: metav1.ConditionTrue, Reason: fenced})
	}
	west := &dbfleetv1alpha1.MemberDatabase{Spec: dbfleetv1alpha1.MemberDatabaseSpec{Role: dbfleetv1alpha1.RoleReplica, Epoch: 3},
		Status: dbfleetv1alpha1.MemberDatabaseStatus{Epoch: 3, Instances: standby("orders-2", west2)}}
	return &scope{dbc: dbc, members: fleet("east", "west"), memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{"east": east, "west": west}}
}

// TestPlanLostPrimary: the most advanced eligible standby takes a lost primary's place, in its
// own share when it is at least as far as any other cluster's; and nothing is planned for a
// primary that is not reported lost.
func TestPlanLostPrimary(t *testing.T) {
	for _, tc := range []struct {
		name                string
		fenced, east1, west string
		lost, here, away    bool
	}{
		{"own share ahead", dbfleetv1alpha1.ReasonPrimaryLost, "0/3000100", "0/3000000", true, true, false},
		{"own share level: it stays in the cluster", dbfleetv1alpha1.ReasonPrimaryLost, "0/3000000", "0/3000000", true, true, false},
		{"another cluster ahead", dbfleetv1alpha1.ReasonPrimaryLost, "0/3000000", "0/3000100", true, true, true},
		{"no standby in its own share", dbfleetv1alpha1.ReasonPrimaryLost, "", "0/3000000", true, false, true},
		{"no standby at all", dbfleetv1alpha1.ReasonPrimaryLost, "", "", true, false, false},
		{"fenced for the hub lease: not lost", dbfleetv1alpha1.ReasonHubLeaseExpired, "0/3000100", "", false, false, false},
		{"not fenced", "", "0/3000100", "", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, lost := planLostPrimary(lostFixture(tc.fenced, tc.east1, tc.west))
			if lost != tc.lost || (plan.here != nil) != tc.here || plan.elsewhere != tc.away {
				t.Fatalf("lost %t, here %v, elsewhere %t; want %t, %t, %t", lost, plan.here, plan.elsewhere, tc.lost, tc.here, tc.away)
			}
			if plan.here != nil && plan.here.pod != "orders-1" {
				t.Fatalf("here is %s, want orders-1 (the lost orders-0 is never chosen)", plan.here.pod)
			}
		})
	}
}

// TestReplaceLostPrimaryPod: the standby of the lost primary's own share is promoted at the next
// epoch once silent, never before; a primary moved elsewhere, or one not lost, is left alone.
func TestReplaceLostPrimaryPod(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{Recorder: events.NewFakeRecorder(10)}

	s := lostFixture(dbfleetv1alpha1.ReasonPrimaryLost, "0/3000100", "0/3000000")
	s.memberDBs["east"].Status.Instances[1].PrimarySilenceSeconds = ptr.To(promotionSilenceSeconds - 1)
	if wait := r.replaceLostPrimaryPod(s, now); wait == 0 || s.dbc.Status.Primary.Epoch != 3 {
		t.Fatalf("promoted (epoch %d, wait %s) a standby heard from a primary %ds ago", s.dbc.Status.Primary.Epoch, wait, promotionSilenceSeconds-1)
	}
	if s.failover.heldReason != dbfleetv1alpha1.ReasonWaitingForSilence {
		t.Fatalf("held for %q, want %s", s.failover.heldReason, dbfleetv1alpha1.ReasonWaitingForSilence)
	}

	s = lostFixture(dbfleetv1alpha1.ReasonPrimaryLost, "0/3000100", "0/3000000")
	if wait := r.replaceLostPrimaryPod(s, now); wait != 0 {
		t.Fatalf("held: %s: %s", s.failover.heldReason, s.failover.heldMessage)
	}
	p := s.dbc.Status.Primary
	if p.Cluster != "east" || p.Pod != "orders-1" || p.Epoch != 4 || p.Preferred != "east" || !strings.Contains(s.failover.promoted, "orders-0") {
		t.Fatalf("primary %+v (%s), want orders-1 on east at epoch 4", *p, s.failover.promoted)
	}

	for _, s := range []*scope{lostFixture(dbfleetv1alpha1.ReasonPrimaryLost, "0/3000000", "0/3000100"), lostFixture("", "0/3000100", "")} {
		r.replaceLostPrimaryPod(s, now)
		if s.dbc.Status.Primary.Epoch != 3 {
			t.Fatalf("primary changed to %+v; the move belongs to scheduling, or there is none", *s.dbc.Status.Primary)
		}
	}
}
