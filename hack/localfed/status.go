package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
)

// status prints each component, its pid and whether it is alive, and the members partitioned;
// it fails when a component is not alive.
func status(d layout.Dir) error {
	st, err := d.Load()
	if err != nil {
		if !d.Exists() {
			fmt.Printf("no local federation in %s (make localfed-up starts one)\n", rel(string(d)))
			return errNothingRuns
		}
		return err
	}
	names := st.ComponentNames()
	extra, _ := d.PidNames()
	for _, n := range extra {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	fmt.Printf("local federation in %s, started %s ago; hub %s, members %s\n", rel(string(d)),
		time.Since(st.Started).Round(time.Second), st.Servers[layout.HubCluster], strings.Join(st.MemberNames(), ", "))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "COMPONENT\tPID\tSTATE\tLOG")
	down := 0
	for _, n := range names {
		pid, alive := pidStatus(d, n)
		state, pidText := "running", fmt.Sprint(pid)
		switch {
		case pid == 0:
			state, pidText = "stopped (no pid file)", "-"
			down++
		case !alive:
			state = "dead"
			down++
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", n, pidText, state, rel(d.LogFile(n)))
	}
	_ = w.Flush()
	if cut := partitionedMembers(d, st, st.MemberNames()); len(cut) > 0 {
		fmt.Printf("\npartitioned: %s (bin/localfed heal MEMBER undoes it)\n", strings.Join(cut, ", "))
	}
	if down < len(names) {
		printNodes(d, st)
	}
	if down == len(names) {
		return errNothingRuns
	}
	if down > 0 {
		return fmt.Errorf("%d of %d components are not running", down, len(names))
	}
	return nil
}

// printNodes prints each member's Nodes as its API server reports them: readiness, runtime and
// kubelet version, node IP (and, for real nodes, the bridge and pod subnet).
func printNodes(d layout.Dir, st *layout.State) {
	fmt.Printf("\nnodes (%s):\n", st.NodeKind)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MEMBER\tNODE\tREADY\tRUNTIME\tKUBELET\tINTERNAL-IP\tBRIDGE\tPOD SUBNET")
	clusters := st.Members
	if st.HubNode {
		clusters = append([]layout.Member{hubSite}, clusters...)
	}
	for _, m := range clusters {
		cs, err := clientFor(d.Kubeconfig(m.Name))
		var nodes *corev1.NodeList
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			nodes, err = cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			cancel()
		}
		if err != nil {
			fmt.Fprintf(w, "%s\t-\t(API server unreachable: %v)\t\t\t\t\t\n", m.Name, err)
			continue
		}
		for _, n := range nodes.Items {
			bridge, subnet := "-", "-"
			for _, rn := range st.Nodes {
				if rn.Name == n.Name {
					bridge, subnet = rn.Bridge, rn.Subnet
				}
			}
			ip := "-"
			for _, a := range n.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					ip = a.Address
				}
			}
			ready := "False"
			if nodeReady(&n) {
				ready = "True"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, n.Name, ready, n.Status.NodeInfo.ContainerRuntimeVersion,
				n.Status.NodeInfo.KubeletVersion, ip, bridge, subnet)
		}
	}
	_ = w.Flush()
}

// errNothingRuns: status exits 3 when no process of the federation is alive (1 when some are not).
var errNothingRuns = errors.New("no process of the federation is running")

// startComponent starts a stopped component again, as up started it, with extra appended to
// its arguments for this run only.
func startComponent(d layout.Dir, name string, extra ...string) error {
	st, err := d.Load()
	if err != nil {
		return err
	}
	c, ok := st.Component(name)
	if !ok {
		return fmt.Errorf("no component %q; known: %s", name, strings.Join(st.ComponentNames(), ", "))
	}
	if pid, alive := pidStatus(d, name); alive {
		return fmt.Errorf("%s is already running (pid %d)", name, pid)
	}
	// The extra arguments are for this run only: state.json keeps the command up used.
	c.Args = append(slices.Clip(c.Args), extra...)
	r, err := start(d, c)
	if err != nil {
		return err
	}
	// A bad start shows within a moment (a port taken, a file gone).
	select {
	case <-r.Done():
		_, how := r.Exited()
		if how == nil {
			how = errors.New("exited with status 0")
		}
		return fmt.Errorf("%s (pid %d) %v at once; its log %s ends:\n%s", name, r.Pid(), how, rel(r.LogFile()), process.Tail(r.LogFile(), 15))
	case <-time.After(time.Second):
	}
	if len(extra) > 0 {
		say("%s: started (pid %d) with %s, log %s", name, r.Pid(), strings.Join(extra, " "), rel(r.LogFile()))
		return nil
	}
	say("%s: started (pid %d), log %s", name, r.Pid(), rel(r.LogFile()))
	return nil
}

// stopComponent stops one component by its pid file.
func stopComponent(d layout.Dir, name string) error {
	if _, err := os.Stat(d.PidFile(name)); errors.Is(err, os.ErrNotExist) {
		if st, lerr := d.Load(); lerr == nil {
			if _, ok := st.Component(name); !ok {
				return fmt.Errorf("no component %q; known: %s", name, strings.Join(st.ComponentNames(), ", "))
			}
		}
	}
	what, err := stop(d, name)
	if err != nil {
		return err
	}
	say("%s: %s", name, what)
	return nil
}
