package databasecluster

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
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

func TestAvailableNeedsPrimaryAndMajority(t *testing.T) {
	ready := func(cluster string) *dbfleetv1alpha1.MemberCluster {
		mc := &dbfleetv1alpha1.MemberCluster{}
		mc.Name = cluster
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Test"})
		return mc
	}
	for _, tc := range []struct {
		name                    string
		primaryReady, replReady int32
		want                    metav1.ConditionStatus
		reason                  string
	}{
		{"primary and majority", 1, 2, metav1.ConditionTrue, ReasonPrimaryReady},
		{"majority without primary", 0, 3, metav1.ConditionFalse, ReasonPrimaryNotReady},
		{"primary without majority", 1, 1, metav1.ConditionFalse, ReasonNoQuorum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := &dbfleetv1alpha1.DatabaseCluster{}
			dbc.Spec.Replicas = 5 // majority is 3
			dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Epoch: 1}
			dbc.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{
				{Cluster: "east", Replicas: 2, Role: dbfleetv1alpha1.RolePrimary},
				{Cluster: "west", Replicas: 3, Role: dbfleetv1alpha1.RoleReplica},
			}
			s := &scope{
				dbc:     dbc,
				members: map[string]*dbfleetv1alpha1.MemberCluster{"east": ready("east"), "west": ready("west")},
				memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{
					"east": mdb(1, 1, 1, 1, tc.primaryReady),
					"west": mdb(1, 1, 1, 1, tc.replReady),
				},
			}
			aggregate(s)
			c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
			if c.Status != tc.want || c.Reason != tc.reason {
				t.Errorf("Available = %s/%s (%s), want %s/%s", c.Status, c.Reason, c.Message, tc.want, tc.reason)
			}
		})
	}
}

func TestScheduledMessageStaysShortOnLargeFleets(t *testing.T) {
	d := placement.Decision{Primary: "c0000"}
	for i := range 1000 {
		name := fmt.Sprintf("c%04d", i)
		if i < 10 {
			d.Shares = append(d.Shares, placement.Share{Cluster: name, Replicas: 1})
		} else {
			d.Excluded = append(d.Excluded, placement.Exclusion{Cluster: name, Reason: "excluded by clusterAffinity"})
		}
	}
	msg := scheduledMessage(d)
	if len(msg) > 400 {
		t.Errorf("message is %d bytes for 1000 clusters:\n%s", len(msg), msg)
	}
	for _, want := range []string{"10 replicas on", "and 5 more clusters", "990 excluded by clusterAffinity", "and 985 more"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if got := truncate(strings.Repeat("é", 800)); len(got) > 1024 || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate kept %d bytes", len(got))
	}
}
