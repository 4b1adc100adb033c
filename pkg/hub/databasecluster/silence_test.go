package databasecluster

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestSilenceGate(t *testing.T) {
	current := &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Pod: "orders-0", Epoch: 3}
	shareWith := func(standbys []string, instances ...dbfleetv1alpha1.InstanceStatus) share {
		m := &dbfleetv1alpha1.MemberDatabase{}
		m.Spec.Standbys = standbys
		m.Status.Instances = instances
		return shareOf(m)
	}
	primary := func(members ...string) dbfleetv1alpha1.InstanceStatus {
		return dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceRunningPrimary, Epoch: 3, PromotedEpoch: 3,
			Failsafe: &dbfleetv1alpha1.InstanceFailsafe{Members: members}}
	}
	standby := func(silent *int64) dbfleetv1alpha1.InstanceStatus {
		return dbfleetv1alpha1.InstanceStatus{Pod: "orders-1", Role: dbfleetv1alpha1.InstanceRunningStandby, Epoch: 3, PrimarySilenceSeconds: silent}
	}
	enough, short := ptr.To(promotionSilenceSeconds), ptr.To(promotionSilenceSeconds-1)
	for _, tc := range []struct {
		name        string
		old, target share
		holds       string // a part of the message; "" when the promotion may go on
	}{
		{"a member silent long enough", shareWith(nil, primary("orders-1", "orders-2")), shareWith(nil, standby(enough)), ""},
		{"a member heard too recently", shareWith(nil, primary("orders-1")), shareWith(nil, standby(short)), "exchanged WAL with a primary less than 13s ago"},
		{"a member that reports no silence", shareWith(nil, primary("orders-1")), shareWith(nil, standby(nil)), "reports no silence"},
		{"not a member of what the old primary reported, though the hub lists it now",
			shareWith([]string{"orders-1"}, primary("orders-2")), shareWith(nil, standby(enough)), "not among the standbys the old primary orders-0 last reported it answers to (orders-2)"},
		{"no report from the old primary: silence alone", shareWith(nil), shareWith(nil, standby(enough)), ""},
		{"no report from the old primary, too recent a contact", shareWith(nil), shareWith(nil, standby(short)), "exchanged WAL"},
		{"the old primary fenced itself at its epoch", shareWith(nil, dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceFenced, Epoch: 3, PromotedEpoch: 3}),
			shareWith(nil, standby(ptr.To[int64](0))), ""},
		{"fenced at an earlier epoch proves nothing of this one", shareWith(nil, dbfleetv1alpha1.InstanceStatus{Pod: "orders-0", Role: dbfleetv1alpha1.InstanceFenced, Epoch: 3, PromotedEpoch: 2}),
			shareWith(nil, standby(short)), "exchanged WAL"},
		{"no instance manager on the target", shareWith(nil, primary()), shareWith(nil), ""},
		{"the target has not reported yet", shareWith(nil, primary("orders-1")), shareWith(nil, dbfleetv1alpha1.InstanceStatus{Pod: "orders-9"}), "waiting for west/orders-1 to report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := silenceGate(tc.old, current, tc.target, "west", "orders-1")
			if tc.holds == "" && got != "" {
				t.Fatalf("held: %s", got)
			}
			if tc.holds != "" && !strings.Contains(got, tc.holds) {
				t.Fatalf("got %q, want a hold saying %q", got, tc.holds)
			}
		})
	}
}
