package layout

import (
	"os"
	"slices"
	"testing"
)

// TestStateRoundTrip: what localfed saves, the demo and the e2e suite load back; pid files are
// listed by component name.
func TestStateRoundTrip(t *testing.T) {
	d := Dir(t.TempDir())
	if err := d.Create(); err != nil {
		t.Fatal(err)
	}
	st := &State{Members: []Member{{Name: "east", Region: "us-east", Zone: "us-east-1a"}}, HubMetrics: "127.0.0.1:1"}
	st.Record(Component{Name: Etcd, Args: []string{"etcd"}})
	st.Record(Component{Name: Agent("east"), Args: []string{"agent", "--old"}})
	st.Record(Component{Name: Agent("east"), Args: []string{"agent", "--new"}})
	if err := d.Save(st); err != nil {
		t.Fatal(err)
	}
	got, err := d.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := got.Component("agent-east"); !ok || !slices.Equal(c.Args, []string{"agent", "--new"}) {
		t.Errorf("agent-east = %+v, %v; want the command recorded last", c, ok)
	}
	if names := got.ComponentNames(); !slices.Equal(names, []string{"etcd", "agent-east"}) {
		t.Errorf("components %v, want [etcd agent-east]", names)
	}
	if got.HubMetrics != st.HubMetrics || !slices.Equal(got.MemberNames(), []string{"east"}) {
		t.Errorf("loaded %+v, want %+v", got, st)
	}
	for _, c := range []string{Etcd, APIServer(HubCluster)} {
		if err := os.WriteFile(d.PidFile(c), []byte("1234\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	names, err := d.PidNames()
	slices.Sort(names)
	if err != nil || !slices.Equal(names, []string{"apiserver-hub", "etcd"}) {
		t.Errorf("PidNames = %v, %v; want [apiserver-hub etcd]", names, err)
	}
}
