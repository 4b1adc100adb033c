package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
)

// killMember kills a whole member cluster at once, as a power cut would: SIGKILL, with no chance
// to shut down cleanly, to its API server, controller manager, scheduler and agent, its nodes'
// kubelets and containerds, and every container on those nodes (the containerd shims and all
// their descendants, postgres among them). Volumes, the etcd the API servers share and the
// state directory stay. `localfed start` brings each component back (API server first); the
// kubelets then start the pods again from their volumes. It prints the components it killed
// (in the order to start them again, one per line after "restart:").
func killMember(d layout.Dir, member string) error {
	st, err := d.Load()
	if err != nil {
		return err
	}
	if _, err := memberIndex(st, member); err != nil {
		return err
	}
	nodes := st.NodesOf(member)
	components := []string{layout.APIServer(member), layout.ControllerManager(member), layout.Scheduler(member)}
	for _, n := range nodes {
		components = append(components, layout.Containerd(n.Name), layout.Kubelet(n.Name))
	}
	components = append(components, layout.Agent(member))
	n := killAtOnce(d, components, nodes)
	say("%s: killed %d processes (%d components and the containers of %d node(s))", member, n, len(components), len(nodes))
	fmt.Println("restart: " + strings.Join(components, " "))
	return nil
}

// killNode kills one node as a lost machine would (its power cut, its cluster's API server and
// agent running on): SIGKILL to its kubelet, its containerd and every container on it. The
// Node and its pods stay in the API as they were until the node's lease runs out. It prints
// what to start again, as killMember does.
func killNode(d layout.Dir, name string) error {
	st, err := d.Load()
	if err != nil {
		return err
	}
	var nodes []layout.Node
	for _, n := range st.Nodes {
		if n.Name == name {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		var names []string
		for _, n := range st.Nodes {
			names = append(names, n.Name)
		}
		return fmt.Errorf("no node %q (nodes: %s)", name, strings.Join(names, ", "))
	}
	components := []string{layout.Containerd(name), layout.Kubelet(name)}
	n := killAtOnce(d, components, nodes)
	say("%s: killed %d processes (its kubelet, its containerd and its containers)", name, n)
	fmt.Println("restart: " + strings.Join(components, " "))
	return nil
}

// killAtOnce SIGKILLs components and every container of nodes (the containerd shims and all
// their descendants), all stopped first so that nothing restarts or reaps what is killed next,
// waits for them to go, and removes the components' pid files. It returns how many processes
// it killed.
func killAtOnce(d layout.Dir, components []string, nodes []layout.Node) int {
	var pids []int
	for _, c := range components {
		if pid, alive := pidStatus(d, c); alive {
			pids = append(pids, pid)
		}
	}
	sockets := map[string]bool{}
	for _, n := range nodes {
		sockets[n.Socket] = true
	}
	shims := shimPidsOf(sockets)
	pids = append(pids, shims...)
	pids = append(pids, descendants(shims)...)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for process.Running(pid, "") && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, c := range components {
		_ = os.Remove(d.PidFile(c))
	}
	return len(pids)
}

// shimPidsOf are the live containerd-shim processes serving one of sockets.
func shimPidsOf(sockets map[string]bool) []int {
	var out []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && sockets[args[i+1]] {
				out = append(out, pid)
			}
		}
	}
	return out
}

// descendants are every process below the roots, by parent pid (one read of /proc).
func descendants(roots []int) []int {
	children := map[int][]int{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		child, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if parent := parentOf(child); parent > 0 {
			children[parent] = append(children[parent], child)
		}
	}
	var out []int
	queue := slices.Clone(roots)
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
