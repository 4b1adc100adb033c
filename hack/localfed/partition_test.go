package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// TestPartitionChains: the member's own subnets keep reaching one another before anything of
// the pod network is dropped both ways, and the agent's connections are dropped by its mark, to
// the hub's address and port only.
func TestPartitionChains(t *testing.T) {
	p := partitionPlan{
		member: "west", comment: "localfed /s partition west",
		ownSubnets: []string{"10.204.2.0/24", "10.204.3.0/24"}, podNetwork: "10.204.0.0/16",
		agentGroup: 46101, hubIP: "127.0.0.1", hubPort: "36443", mark: 2 << 24,
		podsChain: "DBFLEET-PODS-X", hubChain: "DBFLEET-HUB-X",
	}
	want := []partitionChain{
		{name: "DBFLEET-PODS-X", hooks: []string{"FORWARD", "INPUT", "OUTPUT"}, rules: [][]string{
			{"-s", "10.204.2.0/24", "-d", "10.204.2.0/24", "-j", "RETURN"},
			{"-s", "10.204.2.0/24", "-d", "10.204.3.0/24", "-j", "RETURN"},
			{"-s", "10.204.3.0/24", "-d", "10.204.2.0/24", "-j", "RETURN"},
			{"-s", "10.204.3.0/24", "-d", "10.204.3.0/24", "-j", "RETURN"},
			{"-s", "10.204.2.0/24", "-d", "10.204.0.0/16", "-j", "DROP"},
			{"-s", "10.204.0.0/16", "-d", "10.204.2.0/24", "-j", "DROP"},
			{"-s", "10.204.3.0/24", "-d", "10.204.0.0/16", "-j", "DROP"},
			{"-s", "10.204.0.0/16", "-d", "10.204.3.0/24", "-j", "DROP"},
		}},
		{name: "DBFLEET-HUB-X", hooks: []string{"OUTPUT"}, rules: [][]string{
			{"-p", "tcp", "-m", "conntrack", "--ctorigdst", "127.0.0.1", "--ctorigdstport", "36443",
				"-m", "connmark", "--mark", "0x2000000/0xf000000", "-j", "DROP"},
		}},
	}
	if got := p.chains(); !reflect.DeepEqual(got, want) {
		t.Errorf("chains:\n got %v\nwant %v", got, want)
	}

	kwok := p
	kwok.podNetwork, kwok.ownSubnets = "", nil
	if got := kwok.chains(); len(got) != 1 || got[0].name != "DBFLEET-HUB-X" {
		t.Errorf("fake nodes: chains %v, want the hub chain only", got)
	}
	noAgent := p
	noAgent.agentGroup = 0
	if got := noAgent.chains(); len(got) != 1 || got[0].name != "DBFLEET-PODS-X" {
		t.Errorf("no agent process: chains %v, want the pods chain only", got)
	}
	noAgent.podNetwork = ""
	if got := noAgent.chains(); len(got) != 0 {
		t.Errorf("fake nodes and no agent: chains %v, want none", got)
	}
}

// TestAgentMarkRules: each agent's connections carry its own member's mark, the one partition
// drops (agentMark), chosen by the agent's group.
func TestAgentMarkRules(t *testing.T) {
	want := [][]string{
		{"-m", "owner", "--gid-owner", "46100", "-j", "CONNMARK", "--set-xmark", "0x1000000/0xf000000"},
		{"-m", "owner", "--gid-owner", "46101", "-j", "CONNMARK", "--set-xmark", "0x2000000/0xf000000"},
		{"-m", "owner", "--gid-owner", "46102", "-j", "CONNMARK", "--set-xmark", "0x3000000/0xf000000"},
	}
	if got := agentMarkRules(3); !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %v\nwant %v", got, want)
	}
	// Up to 9 members (--members), each mark within the mask and distinct.
	seen := map[uint32]bool{}
	for i := range 9 {
		if m := agentMark(i); m&^partitionMarkMask != 0 || m == 0 || seen[m] {
			t.Errorf("member %d: mark %#x outside %#x, zero or taken", i, m, partitionMarkMask)
		}
		seen[agentMark(i)] = true
	}
}

// TestPartitionChainNames: each state directory, and each member of it, has chains of its own,
// within iptables' 28 characters whatever the member's name.
func TestPartitionChainNames(t *testing.T) {
	seen := map[string]bool{}
	for _, dir := range []layout.Dir{"/work/.localfed", "/tmp/e2e/.localfed"} {
		if c := agentMarksChain(dir); len(c) > 28 || seen[c] {
			t.Errorf("%s: marks chain %q is too long or taken", dir, c)
		}
		seen[agentMarksChain(dir)] = true
		for _, m := range []string{"west", "east", strings.Repeat("m", 40)} {
			pods, hub := partitionChainNames(dir, m)
			for _, c := range []string{pods, hub} {
				if len(c) > 28 || !strings.HasPrefix(c, "DBFLEET-") || seen[c] {
					t.Errorf("%s %s: chain %q is too long, not ours or taken", dir, m, c)
				}
				seen[c] = true
			}
		}
	}
}

// TestPlanPartition: the plan comes from state.json and the agent's hub kubeconfig; an unknown
// member is refused with the members named, and an agent without a group of its own cannot be
// told apart.
func TestPlanPartition(t *testing.T) {
	d := layout.Dir(t.TempDir())
	st := &layout.State{
		Members: []layout.Member{{Name: "east"}, {Name: "west"}, {Name: "central"}},
		Network: &layout.Network{Octet: 204, BridgePrefix: "lf204n", Chain: "LOCALFED-204"},
		Nodes: []layout.Node{
			{Name: "east-node-0", Member: "east", Subnet: "10.204.1.0/24"},
			{Name: "west-node-0", Member: "west", Subnet: "10.204.2.0/24"},
			{Name: "central-node-0", Member: "central", Subnet: "10.204.3.0/24"},
		},
	}
	st.Record(layout.Component{Name: layout.Agent("west"), Args: []string{"agent"}, Group: agentGroupBase + 1})
	st.Record(layout.Component{Name: layout.Agent("east"), Args: []string{"agent"}})
	writeHubKubeconfig(t, d.AgentHubKubeconfig("west"), "https://127.0.0.1:36443")

	p, err := planPartition(d, st, "west", "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.ownSubnets, []string{"10.204.2.0/24"}) || p.podNetwork != "10.204.0.0/16" ||
		p.agentGroup != agentGroupBase+1 || p.hubIP != "127.0.0.1" || p.hubPort != "36443" || p.mark != 2<<24 ||
		p.comment != "localfed "+string(d)+" partition west" {
		t.Errorf("plan %+v", p)
	}

	if _, err := planPartition(d, st, "north", ""); err == nil || !strings.Contains(err.Error(), "east, west, central") {
		t.Errorf("unknown member: %v, want an error naming the members", err)
	}
	if _, err := planPartition(d, st, "east", ""); err == nil || !strings.Contains(err.Error(), "group of its own") {
		t.Errorf("agent without a group: %v, want an error", err)
	}
	p, err = planPartition(d, st, "central", "") // no agent process (--no-dbfleet): its pods only
	if err != nil || p.agentGroup != 0 || len(p.chains()) != 1 {
		t.Errorf("no agent: %+v, %v; want the pods chain only", p, err)
	}

	// A partial partition: west's pods from east's only, both ways; the agent keeps the hub, and
	// its chain is its own.
	p, err = planPartition(d, st, "west", "east")
	if err != nil {
		t.Fatal(err)
	}
	chains := p.chains()
	want := [][]string{{"-s", "10.204.2.0/24", "-d", "10.204.1.0/24", "-j", "DROP"}, {"-s", "10.204.1.0/24", "-d", "10.204.2.0/24", "-j", "DROP"}}
	if len(chains) != 1 || !reflect.DeepEqual(chains[0].rules, want) || p.comment != "localfed "+string(d)+" partition west from east" {
		t.Errorf("west from east: %+v; want one chain dropping %v", chains, want)
	}
	if whole, _ := partitionChainNames(d, "west"); chains[0].name == whole {
		t.Errorf("the partial partition's chain %s is the whole partition's", whole)
	}
	for _, from := range []string{"west", "north"} {
		if _, err := planPartition(d, st, "west", from); err == nil {
			t.Errorf("west from %s planned; want an error", from)
		}
	}
}

// TestHubAddress: the agent's hub server must be an IPv4 address (the rules match on it).
func TestHubAddress(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		server, ip, port string
		ok               bool
	}{
		{"https://127.0.0.1:6443", "127.0.0.1", "6443", true},
		{"https://10.204.4.1:40000", "10.204.4.1", "40000", true},
		{"https://127.0.0.1", "127.0.0.1", "443", true},
		{"https://localhost:6443", "", "", false},
		{"https://[::1]:6443", "", "", false},
	} {
		path := filepath.Join(dir, "kubeconfig")
		writeHubKubeconfig(t, path, c.server)
		ip, port, err := hubAddress(path)
		if (err == nil) != c.ok || ip != c.ip || port != c.port {
			t.Errorf("%s: %q %q %v", c.server, ip, port, err)
		}
	}
}

func writeHubKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	kc := `apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "` + server + `"}}]
contexts: [{name: hub, context: {cluster: hub, user: agent}}]
current-context: hub
users: [{name: agent, user: {token: x}}]
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}
