package member

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

func TestReadInstancesFromStatusEndpoints(t *testing.T) {
	// The instance manager's /status body, with fields the API type does not carry.
	standby := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"pod":"orders-1","role":"standby","epoch":3,"promotedEpoch":1,"timeline":2,"receivedLSN":"0/3000148",` +
			`"replayedLSN":"0/3000060","lagBytes":232,"streaming":true,"ready":true,"systemIdentifier":"7"}`))
	}))
	defer standby.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer failing.Close()
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(block)

	got := readInstances(context.Background(), http.DefaultClient, time.Now, []instanceTarget{
		{pod: "orders-2", url: failing.URL + "/status"},
		{pod: "orders-1", url: standby.URL + "/status", address: "10.1.0.5:5432"},
		{pod: "orders-3", url: slow.URL + "/status"},
		{pod: "orders-4"},
	})
	if len(got) != 4 {
		t.Fatalf("got %d instances, want 4: %+v", len(got), got)
	}
	// The epochs are reported: the hub reads from them whether a switchover's target ever ran as
	// primary at the epoch it was handed.
	want := dbfleetv1alpha1.InstanceStatus{Pod: "orders-1", Role: "standby", Epoch: 3, PromotedEpoch: 1, Address: "10.1.0.5:5432", Timeline: 2,
		ReceivedLSN: "0/3000148", ReplayedLSN: "0/3000060", LagBytes: 232, Ready: true}
	if !reflect.DeepEqual(got[0].InstanceStatus, want) {
		t.Errorf("orders-1: %+v, want %+v", got[0], want)
	}
	for _, in := range got[1:] {
		if in.Role != dbfleetv1alpha1.InstanceUnknown || in.Message == "" || in.Ready {
			t.Errorf("%s: %+v, want unknown with the reason", in.Pod, in)
		}
	}
	if !strings.Contains(got[1].Message, "HTTP 500") {
		t.Errorf("orders-2 message %q does not say HTTP 500", got[1].Message)
	}
	if !strings.Contains(got[2].Message, "deadline") {
		t.Errorf("orders-3 message %q does not say it timed out", got[2].Message)
	}
}

// The epoch at which an instance ran as primary and fenced itself is what tells the agent the
// engine fenced at the share's epoch, and not an instance still fenced from an older epoch that
// has accepted the new one but not started at it yet.
func TestHighestFencedEpoch(t *testing.T) {
	r := func(role dbfleetv1alpha1.InstanceRole, epoch, promoted int64) instanceReport {
		return instanceReport{InstanceStatus: dbfleetv1alpha1.InstanceStatus{Role: role, Epoch: epoch, PromotedEpoch: promoted}}
	}
	for _, tc := range []struct {
		name    string
		reports []instanceReport
		want    int64
	}{
		{"none fenced", []instanceReport{r(dbfleetv1alpha1.InstanceRunningPrimary, 4, 4), r(dbfleetv1alpha1.InstanceRunningStandby, 4, 1)}, 0},
		{"the primary promoted at 4 fenced", []instanceReport{r(dbfleetv1alpha1.InstanceFenced, 4, 4), r(dbfleetv1alpha1.InstanceRunningStandby, 4, 1)}, 4},
		{"fenced at 4, handed 5, not started yet", []instanceReport{r(dbfleetv1alpha1.InstanceFenced, 5, 4)}, 0},
		{"the highest wins", []instanceReport{r(dbfleetv1alpha1.InstanceFenced, 2, 2), r(dbfleetv1alpha1.InstanceFenced, 5, 5)}, 5},
	} {
		if got := highestFencedEpoch(tc.reports); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestInstancesAvailable(t *testing.T) {
	p := func(pod string, ready bool) dbfleetv1alpha1.InstanceStatus {
		return dbfleetv1alpha1.InstanceStatus{Pod: pod, Role: dbfleetv1alpha1.InstanceRunningPrimary, Ready: ready}
	}
	s := func(pod string, ready bool) dbfleetv1alpha1.InstanceStatus {
		return dbfleetv1alpha1.InstanceStatus{Pod: pod, Role: dbfleetv1alpha1.InstanceRunningStandby, Ready: ready}
	}
	for _, tc := range []struct {
		name      string
		in        []dbfleetv1alpha1.InstanceStatus
		replicas  int32
		primary   bool
		want      bool
		msgSubstr string
	}{
		{"primary and streaming standby", []dbfleetv1alpha1.InstanceStatus{p("a", true), s("b", true)}, 2, true, true, "1 standbys stream"},
		{"standby not streaming", []dbfleetv1alpha1.InstanceStatus{p("a", true), s("b", false)}, 2, true, false, "standby b is not streaming"},
		{"primary not writable", []dbfleetv1alpha1.InstanceStatus{p("a", false), s("b", true)}, 2, true, false, "primary a does not take writes"},
		{"primary not writable says why", []dbfleetv1alpha1.InstanceStatus{
			{Pod: "a", Role: dbfleetv1alpha1.InstanceRunningPrimary, Message: "the data volume /var/lib/postgresql/data has 3Mi free of 1Gi"}, s("b", true)},
			2, true, false, "primary a does not take writes: the data volume /var/lib/postgresql/data has 3Mi free of 1Gi"},
		{"no primary", []dbfleetv1alpha1.InstanceStatus{s("a", true), s("b", true)}, 2, true, false, "0 instances run as primary"},
		{"two primaries", []dbfleetv1alpha1.InstanceStatus{p("a", true), p("b", true)}, 2, true, false, "2 instances run as primary"},
		{"a primary in a replica share", []dbfleetv1alpha1.InstanceStatus{p("a", true)}, 1, false, false, "runs as primary"},
		{"replica share streaming", []dbfleetv1alpha1.InstanceStatus{s("a", true)}, 1, false, true, "1 standbys stream"},
		{"missing report", []dbfleetv1alpha1.InstanceStatus{p("a", true)}, 2, true, false, "1/2 instances report"},
		{"unknown", []dbfleetv1alpha1.InstanceStatus{p("a", true), {Pod: "b", Role: dbfleetv1alpha1.InstanceUnknown, Message: "timeout"}}, 2, true, false, "b runs as unknown: timeout"},
	} {
		got, msg := instancesAvailable(tc.in, tc.replicas, tc.primary)
		if got != tc.want || !strings.Contains(msg, tc.msgSubstr) {
			t.Errorf("%s: %v %q, want %v and %q", tc.name, got, msg, tc.want, tc.msgSubstr)
		}
	}
}

// A former primary's final LSN travels from the instance's /status, as the instance manager
// encodes it, into status.instances[].demoted, where the hub reads it for a switchover.
func TestDemotionReachesTheReport(t *testing.T) {
	body, err := json.Marshal(contract.Status{Pod: "orders-0", Role: contract.RoleFenced, Epoch: 4, PromotedEpoch: 3,
		Demoted: &contract.Demotion{Epoch: 3, FinalLSN: "0/30199A8", Timeline: 2}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()
	got := readInstances(context.Background(), http.DefaultClient, time.Now, []instanceTarget{{pod: "orders-0", url: srv.URL + "/status"}})
	want := &dbfleetv1alpha1.InstanceDemotion{Epoch: 3, FinalLSN: "0/30199A8", Timeline: 2}
	if len(got) != 1 || !reflect.DeepEqual(got[0].Demoted, want) {
		t.Fatalf("reported %+v, want demoted %+v", got, want)
	}
}

// A share is read often only while the hub waits on it in a handover: a demoted share whose
// primary has not stopped or not said where its WAL ended, a promoted share with no primary yet.
func TestHandingOver(t *testing.T) {
	in := func(role dbfleetv1alpha1.InstanceRole, demoted *dbfleetv1alpha1.InstanceDemotion) dbfleetv1alpha1.InstanceStatus {
		return dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: role, Demoted: demoted}
	}
	share := func(role dbfleetv1alpha1.ReplicaRole) *dbfleetv1alpha1.MemberDatabase {
		m := &dbfleetv1alpha1.MemberDatabase{}
		m.Spec.Role = role
		return m
	}
	standby := in(dbfleetv1alpha1.InstanceRunningStandby, nil)
	for _, tc := range []struct {
		name      string
		share     *dbfleetv1alpha1.MemberDatabase
		instances []dbfleetv1alpha1.InstanceStatus
		want      bool
	}{
		{"demoted, still primary", share(dbfleetv1alpha1.RoleReplica), []dbfleetv1alpha1.InstanceStatus{in(dbfleetv1alpha1.InstanceRunningPrimary, nil), standby}, true},
		{"demoted, fenced, no final LSN yet", share(dbfleetv1alpha1.RoleReplica), []dbfleetv1alpha1.InstanceStatus{in(dbfleetv1alpha1.InstanceFenced, nil)}, true},
		{"demoted, final LSN reported", share(dbfleetv1alpha1.RoleReplica), []dbfleetv1alpha1.InstanceStatus{in(dbfleetv1alpha1.InstanceFenced, &dbfleetv1alpha1.InstanceDemotion{Epoch: 1, FinalLSN: "0/5000028"})}, false},
		{"demoted, said it has none", share(dbfleetv1alpha1.RoleReplica), []dbfleetv1alpha1.InstanceStatus{in(dbfleetv1alpha1.InstanceFenced, &dbfleetv1alpha1.InstanceDemotion{Epoch: 1, Message: "immediate shutdown"})}, false},
		{"replicas streaming", share(dbfleetv1alpha1.RoleReplica), []dbfleetv1alpha1.InstanceStatus{standby}, false},
		{"promoted, still a standby", share(dbfleetv1alpha1.RolePrimary), []dbfleetv1alpha1.InstanceStatus{standby}, true},
		{"promoted, running", share(dbfleetv1alpha1.RolePrimary), []dbfleetv1alpha1.InstanceStatus{in(dbfleetv1alpha1.InstanceRunningPrimary, nil), standby}, false},
		{"primary share bootstrapping", share(dbfleetv1alpha1.RolePrimary), []dbfleetv1alpha1.InstanceStatus{in(dbfleetv1alpha1.InstanceStopped, nil)}, false},
	} {
		if got := handingOver(tc.share, tc.instances); got != tc.want {
			t.Errorf("%s: handing over %t, want %t", tc.name, got, tc.want)
		}
	}
}

// Every field the MemberDatabase carries of an instance comes from its /status answer (all but
// Address, which the agent reads off the Pod): a field added to the API and not to the conversion
// fails here.
func TestInstanceStatusCarriesEveryReportedField(t *testing.T) {
	st := contract.Status{Pod: "orders-0", Role: contract.RolePrimary, Epoch: 4, PromotedEpoch: 4, Timeline: 3,
		ReceivedLSN: "0/3000148", ReplayedLSN: "0/3000148", LagBytes: 1, Ready: true,
		Synchronous: &contract.Synchronous{Durability: contract.DurabilityRequired, Wanted: 1, Number: 1, StandbyNames: "ANY 1 (orders-5)",
			Standbys: []string{"orders-5"}, Synchronous: []string{"orders-5"}, Waiting: true, Degraded: true},
		Replication: []contract.Replica{{Pod: "orders-5", State: "streaming", SyncState: "quorum", FlushLSN: "0/3000148"}},
		Rejoin:      &contract.Rejoin{Epoch: 4, Method: contract.RejoinRecloned, DivergedData: "/data/pgdata.diverged-3", Message: "rewind failed"},
		Diverged:    []string{"/data/pgdata.diverged-3"},
		Demoted:     &contract.Demotion{Epoch: 3, FinalLSN: "0/30199A8", Timeline: 2, Message: "clean"},
		Failsafe:    &contract.Failsafe{Active: true, Members: []string{"orders-5", "orders-6"}, Unheard: []string{"orders-6"}},
		// Both sides' fields at once: the conversion does not look at the role.
		PrimarySilenceSeconds: ptr.To[int64](7),
		Message:               "all well"}
	got := instanceStatus(st)
	v := reflect.ValueOf(got)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; name != "Address" && v.Field(i).IsZero() {
			t.Errorf("InstanceStatus.%s is not carried from /status", name)
		}
	}
	for _, nested := range []any{*got.Synchronous, got.Replication[0], *got.Rejoin, *got.Demoted, *got.Failsafe} {
		nv := reflect.ValueOf(nested)
		for i := range nv.NumField() {
			if nv.Field(i).IsZero() {
				t.Errorf("%s.%s is not carried from /status", nv.Type().Name(), nv.Type().Field(i).Name)
			}
		}
	}
	if got.Role != dbfleetv1alpha1.InstanceRunningPrimary || got.Synchronous.Durability != dbfleetv1alpha1.DataDurability(contract.DurabilityRequired) {
		t.Errorf("role %q, durability %q", got.Role, got.Synchronous.Durability)
	}
}
