package databasecluster

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// The quorum rule R + W > N, and the instance promoted must be the most advanced of those read.
func TestSynchronousGate(t *testing.T) {
	ready := func(name string, ok bool) *dbfleetv1alpha1.MemberCluster {
		mc := &dbfleetv1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{Type: dbfleetv1alpha1.ConditionReady, Status: status, Reason: "Test"})
		return mc
	}
	memberDB := func(pods map[string]string) *dbfleetv1alpha1.MemberDatabase {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		for pod, lsn := range pods {
			mdb.Status.Instances = append(mdb.Status.Instances, dbfleetv1alpha1.InstanceStatus{Pod: pod, Role: dbfleetv1alpha1.InstanceRunningStandby, ReceivedLSN: lsn, ReplayedLSN: lsn})
		}
		return mdb
	}
	for _, tc := range []struct {
		name     string
		number   int32
		quorum   []string
		b, c     map[string]string // the instances b's and c's shares report
		bReady   bool
		to       string
		wantHold string // a fragment of the reason to wait; empty: promote
	}{
		{name: "both of ANY 1 of 2 read, the most advanced promoted", number: 1, quorum: []string{"db-1", "db-2"},
			b: map[string]string{"db-1": "0/5000000"}, c: map[string]string{"db-2": "0/7000000"}, bReady: true, to: "c"},
		{name: "both read, but the one behind would be promoted", number: 1, quorum: []string{"db-1", "db-2"},
			b: map[string]string{"db-1": "0/5000000"}, c: map[string]string{"db-2": "0/7000000"}, bReady: true, to: "b", wantHold: "db-2 is the most advanced"},
		{name: "one of ANY 1 of 2 read", number: 1, quorum: []string{"db-1", "db-2"},
			b: map[string]string{"db-1": "0/9000000"}, bReady: true, to: "b", wantHold: "but 1 can be"},
		{name: "one of ANY 2 of 2 read is enough", number: 2, quorum: []string{"db-1", "db-2"},
			b: map[string]string{"db-1": "0/5000000"}, bReady: true, to: "b"},
		{name: "a report from a cluster that is not Ready does not count", number: 2, quorum: []string{"db-1", "db-2"},
			b: map[string]string{"db-1": "0/5000000"}, bReady: false, to: "b", wantHold: "but 0 can be"},
		{name: "the share's quorum member is promoted, though not its lowest ordinal", number: 1, quorum: []string{"db-1", "db-3"},
			b: map[string]string{"db-1": "0/5000000"}, c: map[string]string{"db-2": "0/9000000", "db-3": "0/7000000"}, bReady: true, to: "c"},
		{name: "the quorum member ahead is the other pod of the share", number: 1, quorum: []string{"db-1", "db-2", "db-3"},
			b: map[string]string{"db-1": "0/5000000"}, c: map[string]string{"db-2": "0/6000000", "db-3": "0/7000000"}, bReady: true, to: "c"},
		{name: "none read while more were asked for than listed", number: 3, quorum: []string{"db-1"},
			bReady: true, to: "b", wantHold: "but 0 can be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbc := &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
			dbc.Spec.Engine = dbfleetv1alpha1.EnginePostgres
			dbc.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: &dbfleetv1alpha1.SynchronousReplication{Number: tc.number}}
			dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "a", Epoch: 3}
			dbc.Status.Synchronous = &dbfleetv1alpha1.SynchronousStatus{Epoch: 3, Number: tc.number, Standbys: tc.quorum}
			planned := dbc.DeepCopy()
			planned.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{
				{Cluster: "b", Replicas: 1, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 1, Count: 1}},
				{Cluster: "c", Replicas: 2, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 2, Count: 2}},
			}
			s := &scope{dbc: dbc,
				members:   map[string]*dbfleetv1alpha1.MemberCluster{"a": ready("a", false), "b": ready("b", tc.bReady), "c": ready("c", true)},
				memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{"a": memberDB(nil), "b": memberDB(tc.b), "c": memberDB(tc.c)}}
			got := synchronousGate(s, tc.to, choosePromotedPod(s, planned, tc.to).pod)
			switch {
			case tc.wantHold == "" && got != "":
				t.Errorf("held: %s; want a promotion of %s", got, tc.to)
			case tc.wantHold != "" && !strings.Contains(got, tc.wantHold):
				t.Errorf("got %q, want a hold saying %q", got, tc.wantHold)
			}
		})
	}
}
