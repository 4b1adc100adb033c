package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
)

// up brings the federation up: etcd, the API servers, each member's control plane and fake
// Nodes, the hub, and a joined agent per member; it returns once every MemberCluster is Ready,
// leaving the processes running. On failure it stops whatever it started.

type upOptions struct {
	members           []layout.Member
	gracePeriod       time.Duration
	heartbeatInterval time.Duration
	fenceAfter        time.Duration
	volumes           int
	nodes             string // "real" or "kwok"
	nodesPerMember    int
	hubNode           bool // the hub cluster gets a real node too
	noDBFleet         bool // no CRDs, hub, join or agents
}

const (
	realNodes = "real"
	kwokNodes = "kwok"
)

// binaries are the programs the federation runs, by absolute path.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler, kwok, kwokStages, kubelet string
	versitygw                                                                string // the object store
	hub, agent                                                               string
	crds                                                                     string
	images                                                                   string // the OCI archives real nodes import
}

func findBinaries(binDir, crds string, o upOptions) (binaries, error) {
	nodes := o.nodes
	k8s := filepath.Join(binDir, "k8s")
	b := binaries{
		etcd: filepath.Join(k8s, "etcd"), apiserver: filepath.Join(k8s, "kube-apiserver"),
		controllerManager: filepath.Join(k8s, "kube-controller-manager"), scheduler: filepath.Join(k8s, "kube-scheduler"),
		kwok: filepath.Join(k8s, "kwok"), kwokStages: filepath.Join(k8s, "kwok-stages.yaml"), kubelet: filepath.Join(k8s, "kubelet"),
		versitygw: filepath.Join(k8s, "versitygw"),
		hub:       filepath.Join(binDir, "hub"), agent: filepath.Join(binDir, "agent"), crds: crds, images: filepath.Join(binDir, "images"),
	}
	need := []string{b.etcd, b.apiserver, b.controllerManager, b.scheduler, b.versitygw}
	if nodes == realNodes {
		need = append(need, b.kubelet)
	} else {
		need = append(need, b.kwok, b.kwokStages)
	}
	var missing []string
	for _, p := range need {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, rel(p)+" (make k8s-bins)")
		}
	}
	if nodes == realNodes {
		want := memberImages
		if o.hubNode {
			want = append(slices.Clone(want), hubImages...)
		}
		for _, image := range want {
			if p := filepath.Join(b.images, image); !exists(p) && !slices.Contains(missing, rel(p)+" (make images)") {
				missing = append(missing, rel(p)+" (make images)")
			}
		}
	}
	if !o.noDBFleet {
		for _, p := range []string{b.hub, b.agent} {
			if _, err := os.Stat(p); err != nil {
				missing = append(missing, rel(p)+" (make build)")
			}
		}
	}
	if _, err := os.Stat(crds); err != nil {
		missing = append(missing, rel(crds)+" (the CRDs: run from the repository root)")
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("missing: %s", strings.Join(missing, ", "))
	}
	return b, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// fed is a federation being brought up.
type fed struct {
	dir            layout.Dir
	bins           binaries
	volumes        int // PersistentVolumes per member
	nodesPerMember int

	mu    sync.Mutex // guards st and procs
	st    *layout.State
	procs map[string]*process.Process // what this invocation started, by component
}

// launch records c in state.json and starts it; ports are released just before it starts.
func (f *fed) launch(c layout.Component, ports ...*process.Port) (*process.Process, error) {
	f.mu.Lock()
	f.st.Record(c)
	err := f.dir.Save(f.st)
	f.mu.Unlock()
	if err != nil {
		process.ReleaseAll(ports)
		return nil, err
	}
	r, err := start(f.dir, c, ports...)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.procs[c.Name] = r
	f.mu.Unlock()
	say("%s: started (pid %d), log %s", c.Name, r.Pid(), rel(r.LogFile()))
	return r, nil
}

var errAlreadyRunning = errors.New("already running")

func up(ctx context.Context, d layout.Dir, bins binaries, o upOptions) error {
	if d.Exists() {
		if alive := aliveComponents(d); len(alive) > 0 {
			fmt.Fprintf(os.Stderr, "localfed: a local federation is already running in %s (%d processes alive: %s).\n"+
				"Use it (kubectl --kubeconfig %s get mc), or stop it first with 'make localfed-down'.\n",
				rel(string(d)), len(alive), strings.Join(alive, ", "), rel(d.Kubeconfig(layout.HubCluster)))
			return errAlreadyRunning
		}
		say("cleaning up %s left by an earlier run (none of its processes is alive)", rel(string(d)))
		if err := down(d, true); err != nil {
			return err
		}
	}
	if err := d.Create(); err != nil {
		return err
	}
	f := &fed{dir: d, bins: bins, volumes: o.volumes, nodesPerMember: o.nodesPerMember, procs: map[string]*process.Process{}, st: &layout.State{
		Started: time.Now().UTC(), Members: o.members, Servers: map[string]string{}, AgentHealth: map[string]string{},
		GracePeriod: o.gracePeriod.String(), HeartbeatInterval: o.heartbeatInterval.String(), FenceAfter: o.fenceAfter.String(),
		NodeKind: o.nodes, HubNode: o.hubNode, NoDBFleet: o.noDBFleet,
	}}
	if o.nodes == realNodes {
		if err := ensureHostTools(ctx); err != nil {
			_ = os.RemoveAll(string(d))
			return err
		}
		if err := f.planNodes(); err != nil {
			_ = os.RemoveAll(string(d))
			return err
		}
	}
	if err := d.Save(f.st); err != nil {
		return err
	}
	names := make([]string, len(o.members))
	for i, m := range o.members {
		names[i] = fmt.Sprintf("%s (%s/%s)", m.Name, m.Region, m.Zone)
	}
	say("starting a hub and %d member clusters: %s, %d %s node(s) each; state in %s", len(o.members), strings.Join(names, ", "),
		o.nodesPerMember, o.nodes, rel(string(d)))
	if err := f.bringUp(ctx); err != nil {
		say("FAILED: %v", err)
		say("stopping what was started")
		if derr := down(d, false); derr != nil {
			say("teardown: %v (pid files kept in %s)", derr, rel(d.PidsDir()))
		} else {
			say("logs kept in %s; make localfed-down removes them, make localfed-up tries again", rel(d.LogsDir()))
		}
		return err
	}
	f.summary()
	return nil
}

func (f *fed) bringUp(ctx context.Context) error {
	// Each server reserves its own ports and keeps them until it starts (process.ReservePort).
	if err := f.startEtcd(ctx); err != nil {
		return err
	}
	if err := f.createNodeNetwork(ctx); err != nil {
		return fmt.Errorf("the real nodes' network: %w; %s", err, kwokHint)
	}

	say("starting %d kube-apiservers (a minute or so on a busy machine) and the object store", 1+len(f.st.Members))
	steps := []func(context.Context) error{f.startObjectStore}
	for _, cluster := range append([]string{layout.HubCluster}, f.st.MemberNames()...) {
		steps = append(steps, func(ctx context.Context) error { return f.startAPIServer(ctx, cluster) })
	}
	if err := all(ctx, steps...); err != nil {
		return err
	}

	what := "each member's controller manager, scheduler and kwok"
	if f.st.NodeKind == realNodes {
		what = "each member's controller manager, scheduler and real nodes (containerd, kubelet)"
	}
	if f.st.HubNode {
		what += "; the hub cluster's, with the hub image on its node"
	}
	if !f.st.NoDBFleet {
		what += ", and the hub"
	}
	say("starting %s", what)
	steps = nil
	for _, m := range f.st.Members {
		steps = append(steps, func(ctx context.Context) error { return f.startMemberControlPlane(ctx, m) })
	}
	if f.st.HubNode {
		steps = append(steps, func(ctx context.Context) error { return f.startHubControlPlane(ctx) })
	}
	if !f.st.NoDBFleet {
		steps = append(steps, func(ctx context.Context) error {
			if err := f.installCRDs(ctx); err != nil {
				return err
			}
			return f.startHub(ctx)
		})
	}
	if err := all(ctx, steps...); err != nil {
		return err
	}
	if f.st.NoDBFleet {
		return nil // no agents to join: whoever installs dbfleet joins the members
	}

	if agentsOwnGroups() {
		// Before any agent starts, so that every connection of theirs is marked (partition.go).
		if err := createAgentMarks(ctx, f.dir, len(f.st.Members)); err != nil {
			return fmt.Errorf("the chain marking the agents' connections: %w", err)
		}
	}
	say("joining the members and starting their agents")
	steps = nil
	for _, m := range f.st.Members {
		steps = append(steps, func(ctx context.Context) error { return f.joinMember(ctx, m) })
	}
	if err := all(ctx, steps...); err != nil {
		return err
	}

	ready, err := f.membersReady()
	if err != nil {
		return err
	}
	watch := []*process.Process{f.procs[layout.Hub]}
	for _, m := range f.st.Members {
		watch = append(watch, f.procs[layout.Agent(m.Name)])
	}
	if err := waitReady(ctx, "every MemberCluster Ready", 2*time.Minute, ready, watch...); err != nil {
		return fmt.Errorf("%w; see the agents' logs %s and the hub's %s", err, rel(f.dir.LogFile(layout.Agent("*"))), rel(f.dir.LogFile(layout.Hub)))
	}
	return nil
}

// all runs steps concurrently; the first error cancels the others and is returned.
func all(ctx context.Context, steps ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	for _, step := range steps {
		wg.Go(func() {
			if err := step(ctx); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

func (f *fed) summary() {
	hub := "kubectl --kubeconfig " + rel(f.dir.Kubeconfig(layout.HubCluster))
	if f.st.NoDBFleet {
		say("local federation up in %s: the clusters and their nodes are Ready; no dbfleet installed (--no-dbfleet)", time.Since(began).Round(time.Second))
	} else {
		say("local federation up in %s: every MemberCluster is Ready", time.Since(began).Round(time.Second))
	}
	lines := [][2]string{
		{hub + " get mc", "the members, Ready"},
		{hub + " get dbc,cpp,pp,mdb -A", "databases, policies, shares"},
		{"kubectl --kubeconfig " + rel(f.dir.Kubeconfig(f.st.Members[0].Name)) + " get nodes,pods -A", "a member"},
		{"bin/localfed status", "every process and its pid"},
		{"make localfed-down", "stop everything and remove " + rel(string(f.dir))},
	}
	if f.st.NoDBFleet {
		lines = slices.Delete(lines, 0, 2) // nothing of dbfleet yet: docs/install.md installs it
		lines = slices.Insert(lines, 0, [2]string{hub + " get nodes,pods -A", "the hub cluster"})
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	fmt.Println()
	for _, l := range lines {
		fmt.Printf("  %-*s  # %s\n", width, l[0], l[1])
	}
	fmt.Printf("\n  logs in %s/<component>.log, pids in %s/<component>.pid; docs/localfed.md shows fault scenarios\n",
		rel(f.dir.LogsDir()), rel(f.dir.PidsDir()))
}
