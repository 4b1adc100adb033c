package decide

import (
	"testing"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

func TestPlanSynchronous(t *testing.T) {
	streaming := func(pods ...string) []contract.Replica {
		var out []contract.Replica
		for _, p := range pods {
			out = append(out, contract.Replica{Pod: p, State: "streaming", SyncState: "quorum"})
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		want          Synchronous
		replicas      []contract.Replica
		names         string
		number        int
		waiting, degr bool
	}{
		{name: "asynchronous", want: Synchronous{}, names: ""},
		{name: "required, all stream", want: Synchronous{Durability: "required", Number: 1, Standbys: []string{"w-2", "w-1"}},
			replicas: streaming("w-1", "w-2"), names: `ANY 1 ("w-1", "w-2")`, number: 1},
		{name: "required, none streams: still waits for them", want: Synchronous{Durability: "required", Number: 2, Standbys: []string{"w-1", "w-2"}},
			names: `ANY 2 ("w-1", "w-2")`, number: 2, waiting: true},
		{name: "required, itself and local standbys never count", want: Synchronous{Durability: "required", Number: 1, Standbys: []string{"e-0", "w-1"}},
			replicas: streaming("e-1"), names: `ANY 1 ("w-1")`, number: 1, waiting: true},
		{name: "required, no standby elsewhere: waits for one", want: Synchronous{Durability: "required", Number: 1},
			names: `ANY 1 ("` + NoStandby + `")`, number: 1, waiting: true},
		{name: "preferred, one of two streams", want: Synchronous{Durability: "preferred", Number: 2, Standbys: []string{"w-1", "w-2"}},
			replicas: streaming("w-2"), names: `ANY 1 ("w-1", "w-2")`, number: 1, degr: true},
		{name: "preferred, none streams: asynchronous", want: Synchronous{Durability: "preferred", Number: 1, Standbys: []string{"w-1"}},
			replicas: []contract.Replica{{Pod: "w-1", State: "catchup", SyncState: "async"}}, names: "", number: 0, degr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, st := PlanSynchronous(tc.want, "e-0", tc.replicas)
			if names != tc.names {
				t.Errorf("names = %q, want %q", names, tc.names)
			}
			if !tc.want.Enabled() {
				if st != nil {
					t.Errorf("status = %+v, want none", st)
				}
				return
			}
			if st.Number != tc.number || st.Waiting != tc.waiting || st.Degraded != tc.degr {
				t.Errorf("status = %+v, want number %d waiting %v degraded %v", st, tc.number, tc.waiting, tc.degr)
			}
		})
	}
}
