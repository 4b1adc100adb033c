package databasecluster

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// reportedShare is a MemberDatabase whose instances report pod → "received replayed".
func reportedShare(pods map[string]string) *dbfleetv1alpha1.MemberDatabase {
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	for pod, lsns := range pods {
		received, replayed, _ := strings.Cut(lsns, " ")
		mdb.Status.Instances = append(mdb.Status.Instances, dbfleetv1alpha1.InstanceStatus{
			Pod: pod, Role: dbfleetv1alpha1.InstanceRunningStandby, ReceivedLSN: received, ReplayedLSN: replayed})
	}
	return mdb
}

// Inside a share the instance furthest in the WAL wins: received LSN first, then replayed;
// ties keep the pod asked to be kept, else the lowest ordinal; a pod that reported nothing is
// behind every pod that did.
func TestChoosePrimaryPod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reports map[string]string // db-<ordinal> of ordinals 4..6 → "received replayed"
		keep    int32
		want    string
	}{
		{name: "the higher ordinal received more", reports: map[string]string{"db-4": "0/5000000 0/5000000", "db-5": "0/7000000 0/4000000"},
			keep: 4, want: "db-5"},
		{name: "equal received: the one that replayed more", reports: map[string]string{"db-4": "0/7000000 0/3000000", "db-5": "0/7000000 0/6000000"},
			keep: 4, want: "db-5"},
		{name: "a tie keeps the lowest ordinal", reports: map[string]string{"db-4": "0/7000000 0/7000000", "db-5": "0/7000000 0/7000000", "db-6": "0/7000000 0/7000000"},
			keep: -1, want: "db-4"},
		{name: "a tie keeps the pod asked to be kept", reports: map[string]string{"db-4": "0/7000000 0/7000000", "db-5": "0/7000000 0/7000000", "db-6": "0/7000000 0/7000000"},
			keep: 5, want: "db-5"},
		{name: "the kept pod loses to one further on", reports: map[string]string{"db-4": "0/7000000 0/7000000", "db-5": "0/6000000 0/6000000"},
			keep: 5, want: "db-4"},
		{name: "a pod that reported nothing is behind one that did", reports: map[string]string{"db-6": "0/1000000 0/1000000"},
			keep: 4, want: "db-6"},
		{name: "nothing reported: the lowest ordinal", keep: -1, want: "db-4"},
		{name: "a report of a pod outside the share is not compared", reports: map[string]string{"db-7": "1/0 1/0", "db-5": "0/1 0/1"},
			keep: -1, want: "db-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			readings := shareReadings("db", "b", 4, 3, reportedShare(tc.reports), nil)
			k := choosePrimaryPod(readings, tc.keep)
			if k < 0 || readings[k].pod != tc.want {
				t.Fatalf("chose %d of %v, want %s", k, readings, tc.want)
			}
		})
	}
}

// A promotion compares every instance of the share it promotes, not only its lowest ordinal;
// with dataDurability required only the quorum's; and what it says names the LSNs compared.
func TestChoosePromotedPod(t *testing.T) {
	placements := []dbfleetv1alpha1.ClusterPlacement{
		{Cluster: "b", Replicas: 2, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 2, Count: 2}},
		{Cluster: "c", Replicas: 2, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 4, Count: 2}},
	}
	scopeWith := func(quorum []string, b, c map[string]string) (*scope, *dbfleetv1alpha1.DatabaseCluster) {
		dbc := &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
		dbc.Spec.Engine = dbfleetv1alpha1.EnginePostgres
		dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "a", Epoch: 3, Pod: "db-0"}
		if quorum != nil {
			dbc.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: &dbfleetv1alpha1.SynchronousReplication{Number: 1}}
			dbc.Status.Synchronous = &dbfleetv1alpha1.SynchronousStatus{Epoch: 3, Number: 1, Standbys: quorum}
		}
		dbc.Status.Placements = placements
		planned := dbc.DeepCopy()
		return &scope{dbc: dbc, memberDBs: map[string]*dbfleetv1alpha1.MemberDatabase{"b": reportedShare(b), "c": reportedShare(c)}}, planned
	}

	t.Run("asynchronous: the share's most advanced instance", func(t *testing.T) {
		s, planned := scopeWith(nil,
			map[string]string{"db-2": "0/5000000 0/5000000", "db-3": "0/9000000 0/8000000"},
			map[string]string{"db-4": "0/6000000 0/6000000"})
		got := choosePromotedPod(s, planned, "b")
		if got.pod != "db-3" || got.ordinal != 3 {
			t.Fatalf("chose %s (%d), want db-3", got.pod, got.ordinal)
		}
		msg := got.describe()
		for _, want := range []string{"pod db-3", "b/db-3 received 0/9000000 replayed 0/8000000", "b/db-2 received 0/5000000", "c/db-4 received 0/6000000"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%q does not say %q", msg, want)
			}
		}
		if !strings.HasPrefix(msg, "pod db-3, the furthest in the WAL of the instances compared (b/db-3") {
			t.Errorf("%q does not name the chosen reading first", msg)
		}
	})
	t.Run("required: only a synchronous standby, even when another is further", func(t *testing.T) {
		s, planned := scopeWith([]string{"db-2", "db-4"},
			map[string]string{"db-2": "0/5000000 0/5000000", "db-3": "0/9000000 0/9000000"},
			map[string]string{"db-4": "0/6000000 0/6000000"})
		got := choosePromotedPod(s, planned, "b")
		if got.pod != "db-2" {
			t.Fatalf("chose %s, want db-2, the share's only synchronous standby", got.pod)
		}
		if msg := got.describe(); strings.Contains(msg, "db-3") || !strings.Contains(msg, "synchronous standbys compared") {
			t.Errorf("%q: want only the synchronous standbys compared", msg)
		}
	})
	t.Run("required: the quorum member ahead, though not the lowest ordinal", func(t *testing.T) {
		s, planned := scopeWith([]string{"db-2", "db-3", "db-4"},
			map[string]string{"db-2": "0/5000000 0/5000000", "db-3": "0/7000000 0/7000000"},
			map[string]string{"db-4": "0/6000000 0/6000000"})
		if got := choosePromotedPod(s, planned, "b"); got.pod != "db-3" {
			t.Fatalf("chose %s, want db-3", got.pod)
		}
		progress := synchronousProgress(s)
		if contract.LSN(progress["b"].Received).String() != "0/7000000" {
			t.Errorf("synchronousProgress[b] = %s, want b's furthest quorum member (db-3, 0/7000000)", contract.LSN(progress["b"].Received).String())
		}
	})
	t.Run("nothing reported: the lowest ordinal", func(t *testing.T) {
		s, planned := scopeWith(nil, nil, nil)
		got := choosePromotedPod(s, planned, "c")
		if got.pod != "db-4" || !strings.Contains(got.describe(), "no instance reported") {
			t.Fatalf("chose %s (%s), want db-4, the lowest ordinal", got.pod, got.describe())
		}
	})
}

// A status written before status.primary.pod existed is read as the lowest ordinal, and a named
// pod is what the primary share's MemberDatabase is given.
func TestPrimaryPodOfAnOlderStatus(t *testing.T) {
	dbc := &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
	dbc.Status.Placements = []dbfleetv1alpha1.ClusterPlacement{{Cluster: "b", Replicas: 2, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 2, Count: 2}}}
	dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: "b", Epoch: 1}
	if got := primaryPod(dbc); got != "db-2" {
		t.Errorf("primaryPod = %q, want db-2", got)
	}
	namePrimaryPod(dbc)
	if dbc.Status.Primary.Pod != "db-2" {
		t.Errorf("status.primary.pod = %q, want db-2", dbc.Status.Primary.Pod)
	}
	dbc.Status.Primary.Pod = "db-3"
	if o := primaryOrdinalOf(dbc, "b"); o == nil || *o != 3 {
		t.Errorf("primaryOrdinalOf(b) = %v, want 3", o)
	}
	if o := primaryOrdinalOf(dbc, "c"); o != nil {
		t.Errorf("primaryOrdinalOf(c) = %v, want none: c does not hold the primary", *o)
	}
}
