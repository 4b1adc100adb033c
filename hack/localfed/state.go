package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The state directory (.localfed/ by default) holds everything a running federation needs and
// nothing else: removing it (localfed down) leaves no trace.
//
//	state.json                    what runs: members, ports, every component's command line
//	hub.kubeconfig                admin of the hub API server
//	<member>.kubeconfig           admin of a member API server
//	<member>-agent.yaml           the manifests `hub join` printed for the member
//	<member>-hub.kubeconfig       the agent's hub credential, taken from those manifests
//	pids/<component>.pid          one pid per running process
//	logs/<component>.log          its stdout and stderr
//	pki/<cluster>/                service-account key pair, admin token file, serving certs
//	etcd/                         etcd's data

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
}

// stateDir is the absolute path of the state directory.
type stateDir string

func (d stateDir) path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}
func (d stateDir) stateFile() string { return d.path("state.json") }
func (d stateDir) pidFile(component string) string {
	return d.path("pids", component+".pid")
}
func (d stateDir) logFile(component string) string {
	return d.path("logs", component+".log")
}
func (d stateDir) kubeconfig(cluster string) string { return d.path(cluster + ".kubeconfig") }
func (d stateDir) pki(cluster string) string        { return d.path("pki", cluster) }
func (d stateDir) agentManifests(member string) string {
	return d.path(member + "-agent.yaml")
}
func (d stateDir) agentHubKubeconfig(member string) string {
	return d.path(member + "-hub.kubeconfig")
}

// rel is p relative to the working directory when it is below it, for messages.
func rel(p string) string {
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	if r, err := filepath.Rel(wd, p); err == nil && r != ".." && !strings.HasPrefix(r, "../") {
		return r
	}
	return p
}

// create makes the layout of a fresh state directory.
func (d stateDir) create() error {
	for _, sub := range []string{"pids", "logs", "pki", "etcd"} {
		if err := os.MkdirAll(d.path(sub), 0o700); err != nil {
			return err
		}
	}
	return nil
}

func (d stateDir) load() (*State, error) {
	data, err := os.ReadFile(d.stateFile())
	if err != nil {
		return nil, err
	}
	st := &State{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s: %w", d.stateFile(), err)
	}
	return st, nil
}

// save writes state.json atomically.
func (d stateDir) save(st *State) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := d.stateFile() + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.stateFile())
}

// component is the recorded component of that name.
func (st *State) component(name string) (Component, bool) {
	for _, c := range st.Components {
		if c.Name == name {
			return c, true
		}
	}
	return Component{}, false
}

// record adds or replaces a component.
func (st *State) record(c Component) {
	for i := range st.Components {
		if st.Components[i].Name == c.Name {
			st.Components[i] = c
			return
		}
	}
	st.Components = append(st.Components, c)
}

// pidNames lists the components that have a pid file, in no particular order.
func (d stateDir) pidNames() ([]string, error) {
	entries, err := os.ReadDir(d.path("pids"))
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

func (d stateDir) exists() bool {
	_, err := os.Stat(string(d))
	return err == nil
}
