package scheduling

import (
	"testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
)

func TestProgressIsTheShareFurthestInstance(t *testing.T) {
	share := func(instances ...dbfleetv1alpha1.InstanceStatus) *dbfleetv1alpha1.MemberDatabase {
		m := &dbfleetv1alpha1.MemberDatabase{}
		m.Status.Instances = instances
		return m
	}
	got := Progress(map[string]*dbfleetv1alpha1.MemberDatabase{
		"east": share(
			dbfleetv1alpha1.InstanceStatus{Pod: "a-0", ReceivedLSN: "0/5000000", ReplayedLSN: "0/4000000"},
			dbfleetv1alpha1.InstanceStatus{Pod: "a-1", ReceivedLSN: "0/5000000", ReplayedLSN: "0/5000000"}),
		"west":    share(dbfleetv1alpha1.InstanceStatus{Pod: "a-2", ReceivedLSN: "1/0", ReplayedLSN: "0/FFFFFFFF"}),
		"unknown": share(dbfleetv1alpha1.InstanceStatus{Pod: "a-3", Role: dbfleetv1alpha1.InstanceUnknown}),
		"mysql":   share(),
		"gone":    nil,
	})
	want := map[string]placement.WALProgress{
		"east": {Received: 0x5000000, Replayed: 0x5000000},
		"west": {Received: 1 << 32, Replayed: 0xFFFFFFFF},
	}
	if len(got) != len(want) {
		t.Fatalf("Progress = %v, want %v", got, want)
	}
	for c, w := range want {
		if got[c] != w {
			t.Errorf("Progress[%s] = %+v, want %+v", c, got[c], w)
		}
	}
}
