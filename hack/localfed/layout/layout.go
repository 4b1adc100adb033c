// Package layout is the state directory of a local federation (.localfed/ by default): where
// hack/localfed writes each cluster's kubeconfig, each process's pid file and log, and state.json,
// and where hack/demo and test/e2e read them. It is the one definition of those paths and of the
// component names that name the pid and log files.
//
// The directory holds everything a running federation needs and nothing else: removing it
// (localfed down) leaves no trace.
//
//	state.json                    what runs: members, ports, every component's command line
//	hub.kubeconfig                admin of the hub API server
//	<member>.kubeconfig           admin of a member API server
//	<member>-agent.yaml           the manifests `hub join` printed for the member
//	<member>-hub.kubeconfig       the agent's hub credential, taken from those manifests
//	pids/<component>.pid          one pid per running process
//	logs/<component>.log          its stdout and stderr; logs/join-<member>.log is hub join's output
//	pki/<cluster>/                service-account key pair, admin token file, serving certs
//	etcd/                         etcd's data
//	demo/                         the manifests make demo applied
package layout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// DefaultDir is the state directory localfed uses unless told otherwise (--dir), relative to the
// repository root.
const DefaultDir = ".localfed"

// HubCluster is the hub's cluster name in file names (hub.kubeconfig, apiserver-hub).
const HubCluster = "hub"

// Component names: each names a process's pid and log files and its entry in state.json.
const (
	Etcd = "etcd"
	Hub  = "hub" // hub run
	// ObjectStore is the S3 server (the Versity S3 gateway) backups go to.
	ObjectStore = "object-store"
)

// APIServer is the kube-apiserver of a cluster (HubCluster or a member).
func APIServer(cluster string) string { return "apiserver-" + cluster }

// ControllerManager is a member's kube-controller-manager.
func ControllerManager(member string) string { return "controller-manager-" + member }

// Scheduler is a member's kube-scheduler.
func Scheduler(member string) string { return "scheduler-" + member }

// Kwok is the kwok that plays a member's kubelets.
func Kwok(member string) string { return "kwok-" + member }

// Agent is a member's dbfleet agent.
func Agent(member string) string { return "agent-" + member }

// Containerd is the container runtime of a real node.
func Containerd(node string) string { return "containerd-" + node }

// Kubelet is the kubelet of a real node.
func Kubelet(node string) string { return "kubelet-" + node }

// Dir is a state directory. Its paths are as absolute as the Dir is.
type Dir string

// Path joins elem to the directory.
func (d Dir) Path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}

// StateFile is state.json.
func (d Dir) StateFile() string { return d.Path("state.json") }

// PidsDir holds the pid files.
func (d Dir) PidsDir() string { return d.Path("pids") }

// LogsDir holds the logs.
func (d Dir) LogsDir() string { return d.Path("logs") }

// PidFile is a component's pid file.
func (d Dir) PidFile(component string) string { return d.Path("pids", component+".pid") }

// LogFile is a component's log.
func (d Dir) LogFile(component string) string { return d.Path("logs", component+".log") }

// JoinLog is the output of `hub join` for a member.
func (d Dir) JoinLog(member string) string { return d.LogFile("join-" + member) }

// Kubeconfig is the admin kubeconfig of a cluster (HubCluster or a member).
func (d Dir) Kubeconfig(cluster string) string { return d.Path(cluster + ".kubeconfig") }

// PKI holds a cluster's keys, token file and the serving certificates its API server generates.
func (d Dir) PKI(cluster string) string { return d.Path("pki", cluster) }

// EtcdData is etcd's data directory.
func (d Dir) EtcdData() string { return d.Path("etcd") }

// ObjectStoreFile is object-store.json: where the object store is and how to sign in to it.
func (d Dir) ObjectStoreFile() string { return d.Path("object-store.json") }

// ObjectStoreData is the directory the object store keeps its buckets in.
func (d Dir) ObjectStoreData() string { return d.Path("object-store") }

// AgentManifests are the manifests `hub join` printed for a member.
func (d Dir) AgentManifests(member string) string { return d.Path(member + "-agent.yaml") }

// AgentHubKubeconfig is a member agent's credential for the hub.
func (d Dir) AgentHubKubeconfig(member string) string { return d.Path(member + "-hub.kubeconfig") }

// AgentMemberKubeconfig is a member agent's credential for its own cluster: a token of the
// agent's ServiceAccount there, so that it runs with the rights join gives it.
func (d Dir) AgentMemberKubeconfig(member string) string { return d.Path(member + "-agent.kubeconfig") }

// NodeDir holds a real node's containerd (root, state, socket, config), kubelet (root dir,
// config, pod logs), CNI configuration and IPAM state, and the node's volumes.
func (d Dir) NodeDir(node string) string { return d.Path("nodes", node) }

// Demo holds what make demo applied.
func (d Dir) Demo() string { return d.Path("demo") }

// Member is one member cluster of the federation.
type Member struct {
	Name   string `json:"name"`
	Region string `json:"region"`
	Zone   string `json:"zone"`
}

// Component is one process of the federation: its name names the pid and log files, and Args
// (Args[0] the binary) is exactly how it was started, so `localfed start` can start it again.
type Component struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
	// Group, when not 0, is the group id it runs with (as root): each agent has one of its own,
	// which is how `localfed partition` tells the agent's connections to the hub from others'.
	Group int `json:"group,omitempty"`
	// Env is added to its environment: secrets go there rather than on a command line anyone
	// on the host can read (state.json is readable by its owner alone).
	Env []string `json:"env,omitempty"`
}

// State is state.json.
type State struct {
	Started           time.Time         `json:"started"`
	Members           []Member          `json:"members"`
	EtcdURL           string            `json:"etcdURL"`
	Servers           map[string]string `json:"servers"` // cluster ("hub" or a member) → API server URL
	HubMetrics        string            `json:"hubMetrics"`
	HubHealth         string            `json:"hubHealth"`
	AgentHealth       map[string]string `json:"agentHealth"`
	GracePeriod       string            `json:"clusterGracePeriod"`
	HeartbeatInterval string            `json:"heartbeatInterval"`
	FenceAfter        string            `json:"fenceAfter"`
	Components        []Component       `json:"components"`
	// NodeKind is "real" (kubelet, containerd and runc: pods run as containers) or "kwok".
	NodeKind string `json:"nodeKind"`
	// Network is the real nodes' network: one bridge per node. Empty with kwok.
	Network *Network `json:"network,omitempty"`
	// Nodes are the real nodes, in creation order. Empty with kwok.
	Nodes []Node `json:"nodes,omitempty"`
	// HubNode: the hub cluster has a real node too (Member HubCluster), with a controller manager
	// and a scheduler, so the hub can run as pods (localfed up --hub-node).
	HubNode bool `json:"hubNode,omitempty"`
	// NoDBFleet: up started the clusters only, no CRDs, hub, join or agents (localfed up
	// --no-dbfleet): dbfleet is installed some other way, e.g. with the Helm charts.
	NoDBFleet bool `json:"noDBFleet,omitempty"`
}

// Network is the address plan of the real nodes: node k (from 1) has bridge BridgePrefix<k>
// with address 10.<Octet>.<k>.1/24, its pods take the rest of that /24, and a nat chain
// Chain sends each pod's traffic for its cluster's `kubernetes` Service to its API server.
type Network struct {
	Octet        int    `json:"octet"`
	BridgePrefix string `json:"bridgePrefix"`
	Chain        string `json:"chain"`
	// StoreBridge is the bridge, outside every node, that holds the object store's address
	// (StoreIP): a service no member cluster owns, reached from every pod through the host.
	StoreBridge string `json:"storeBridge,omitempty"`
	StoreIP     string `json:"storeIP,omitempty"`
}

// Node is one real node of a member (or, with HubNode, of the hub cluster: Member HubCluster).
type Node struct {
	Name        string `json:"name"`
	Member      string `json:"member"`
	Index       int    `json:"index"`  // k: bridge, subnet
	Bridge      string `json:"bridge"` // e.g. lf210n1
	Subnet      string `json:"subnet"` // e.g. 10.210.1.0/24
	IP          string `json:"ip"`     // the bridge's address: the node IP
	KubeletPort int    `json:"kubeletPort"`
	Socket      string `json:"socket"` // containerd's
}

// NodesOf are the member's real nodes.
func (st *State) NodesOf(member string) []Node {
	var out []Node
	for _, n := range st.Nodes {
		if n.Member == member {
			out = append(out, n)
		}
	}
	return out
}

// MemberNames are the members' names, in order.
func (st *State) MemberNames() []string {
	out := make([]string, len(st.Members))
	for i, m := range st.Members {
		out[i] = m.Name
	}
	return out
}

// Component is the recorded component of that name.
func (st *State) Component(name string) (Component, bool) {
	for _, c := range st.Components {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

// ComponentNames are the recorded components' names, in the order they were recorded.
func (st *State) ComponentNames() []string {
	out := make([]string, 0, len(st.Components))
	for _, c := range st.Components {
		out = append(out, c.Name)
	}
	return out
}

// Record adds or replaces a component.
func (st *State) Record(c Component) {
	for i := range st.Components {
		if st.Components[i].Name == c.Name {
			st.Components[i] = c
			return
		}
	}
	st.Components = append(st.Components, c)
}

// Create makes the layout of a fresh state directory (mode 0700).
func (d Dir) Create() error {
	for _, sub := range []string{d.PidsDir(), d.LogsDir(), d.Path("pki"), d.EtcdData()} {
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// Exists reports whether the directory exists.
func (d Dir) Exists() bool {
	_, err := os.Stat(string(d))
	return err == nil
}

// Load reads state.json.
func (d Dir) Load() (*State, error) {
	data, err := os.ReadFile(d.StateFile())
	if err != nil {
		return nil, err
	}
	st := &State{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s: %w", d.StateFile(), err)
	}
	return st, nil
}

// Save writes state.json atomically.
func (d Dir) Save(st *State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := d.StateFile() + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.StateFile())
}

// PidNames lists the components that have a pid file, in no particular order.
func (d Dir) PidNames() ([]string, error) {
	entries, err := os.ReadDir(d.PidsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); filepath.Ext(n) == ".pid" {
			names = append(names, n[:len(n)-len(".pid")])
		}
	}
	return names, nil
}
