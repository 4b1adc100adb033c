package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// The real nodes' network. Every node has a Linux bridge of its own with a /24 out of
// 10.<octet>.0.0/16 (node k: 10.<octet>.<k>.0/24, the bridge at .1, which is also the node IP).
// The CNI bridge plugin attaches each pod to its node's bridge; the host routes between bridges,
// so every pod reaches every other member's pods at their pod IPs without NAT (PodIP mode), and
// the host reaches them all.
//
// Pods reach their own cluster's API server through the `kubernetes` Service (10.96.0.1:443) as
// in any cluster: with no kube-proxy here, one DNAT rule per node in a nat chain of ours sends
// that address to the member's kube-apiserver, which listens on its first node's bridge address.
// A filter chain of ours accepts forwarding within the pod network, whatever FORWARD's policy is.
// Both chains hang off the built-in chains by one rule carrying a comment naming the state
// directory; teardown removes exactly those rules, the chains and the bridges.

const (
	// kubernetesServiceIP is the first address of --service-cluster-ip-range (10.96.0.0/24):
	// the ClusterIP of the `kubernetes` Service that in-cluster clients use.
	kubernetesServiceIP = "10.96.0.1"
	firstOctet          = 200
	lastOctet           = 249
)

// run runs a command, returning its combined output in the error.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pickNetwork chooses the first 10.<octet>.0.0/16 that no interface of the host uses and no
// bridge of another local federation claims.
func pickNetwork() (*layout.Network, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	links, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	used := map[int]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip := ipn.IP.To4(); ip != nil && ip[0] == 10 {
				used[int(ip[1])] = true
			}
		}
	}
	for _, l := range links {
		var o int
		if _, err := fmt.Sscanf(l.Name, "lf%dn", &o); err == nil {
			used[o] = true
		}
	}
	for o := firstOctet; o <= lastOctet; o++ {
		if !used[o] {
			return &layout.Network{Octet: o, BridgePrefix: fmt.Sprintf("lf%dn", o), Chain: fmt.Sprintf("LOCALFED-%d", o)}, nil
		}
	}
	return nil, fmt.Errorf("no free 10.x.0.0/16 for the pod network between 10.%d and 10.%d (other local federations running?)", firstOctet, lastOctet)
}

// planNode fills in the network of node k.
func planNode(n *layout.Network, k int, node *layout.Node) {
	node.Index = k
	node.Bridge = n.BridgePrefix + strconv.Itoa(k)
	node.Subnet = fmt.Sprintf("10.%d.%d.0/24", n.Octet, k)
	node.IP = fmt.Sprintf("10.%d.%d.1", n.Octet, k)
}

// podNetwork is the /16 all nodes' pods are in.
func podNetwork(n *layout.Network) string { return fmt.Sprintf("10.%d.0.0/16", n.Octet) }

// hookComment marks the rules in the built-in chains that jump to ours.
func hookComment(d layout.Dir) string { return "localfed " + string(d) }

// createNetwork creates the chains and their hooks; bridges come with each node (createBridge).
func createNetwork(ctx context.Context, d layout.Dir, n *layout.Network) error {
	for _, c := range []struct{ table, builtin string }{{"nat", "PREROUTING"}, {"filter", "FORWARD"}} {
		if err := run(ctx, "iptables", "-w", "-t", c.table, "-N", n.Chain); err != nil {
			return err
		}
		if err := run(ctx, "iptables", "-w", "-t", c.table, "-I", c.builtin, "-m", "comment", "--comment", hookComment(d), "-j", n.Chain); err != nil {
			return err
		}
	}
	pods := podNetwork(n)
	if err := run(ctx, "iptables", "-w", "-t", "filter", "-A", n.Chain, "-s", pods, "-j", "ACCEPT"); err != nil {
		return err
	}
	return run(ctx, "iptables", "-w", "-t", "filter", "-A", n.Chain, "-d", pods, "-j", "ACCEPT")
}

// createBridge creates node's bridge with the node IP, up, before its kubelet starts (the node IP
// must be an address of the host) and before its member's API server binds to it.
func createBridge(ctx context.Context, node layout.Node) error {
	if err := run(ctx, "ip", "link", "add", "name", node.Bridge, "type", "bridge"); err != nil {
		return err
	}
	if err := run(ctx, "ip", "addr", "add", node.IP+"/24", "dev", node.Bridge); err != nil {
		return err
	}
	return run(ctx, "ip", "link", "set", node.Bridge, "up")
}

// routeKubernetesService sends node's pods' connections to 10.96.0.1:443 to apiserver (host:port).
func routeKubernetesService(ctx context.Context, n *layout.Network, node layout.Node, apiserver string) error {
	return run(ctx, "iptables", "-w", "-t", "nat", "-A", n.Chain, "-s", node.Subnet, "-d", kubernetesServiceIP+"/32",
		"-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", apiserver)
}

// removeNetwork deletes the hooks, chains and bridges that state records; what is already gone
// is not an error.
func removeNetwork(ctx context.Context, d layout.Dir, st *layout.State) error {
	if st.Network == nil {
		return nil
	}
	var errs []error
	for _, c := range []struct{ table, builtin string }{{"nat", "PREROUTING"}, {"filter", "FORWARD"}} {
		for run(ctx, "iptables", "-w", "-t", c.table, "-D", c.builtin, "-m", "comment", "--comment", hookComment(d), "-j", st.Network.Chain) == nil {
		}
		if chainExists(ctx, c.table, st.Network.Chain) {
			if err := run(ctx, "iptables", "-w", "-t", c.table, "-F", st.Network.Chain); err != nil {
				errs = append(errs, err)
			}
			if err := run(ctx, "iptables", "-w", "-t", c.table, "-X", st.Network.Chain); err != nil {
				errs = append(errs, err)
			}
		}
	}
	bridges := []string{st.Network.StoreBridge}
	for _, node := range st.Nodes {
		bridges = append(bridges, node.Bridge)
	}
	for _, b := range bridges {
		if b == "" {
			continue
		}
		if _, err := net.InterfaceByName(b); err != nil {
			continue
		}
		if err := run(ctx, "ip", "link", "del", b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func chainExists(ctx context.Context, table, chain string) bool {
	return run(ctx, "iptables", "-w", "-t", table, "-n", "-L", chain) == nil
}

// networkLeftovers lists what of the network state records still exists.
func networkLeftovers(ctx context.Context, d layout.Dir, st *layout.State) []string {
	if st.Network == nil {
		return nil
	}
	var out []string
	for _, table := range []string{"nat", "filter"} {
		if chainExists(ctx, table, st.Network.Chain) {
			out = append(out, fmt.Sprintf("iptables chain %s/%s", table, st.Network.Chain))
		}
		if rules, err := exec.CommandContext(ctx, "iptables", "-w", "-t", table, "-S").Output(); err == nil &&
			strings.Contains(string(rules), hookComment(d)) {
			out = append(out, fmt.Sprintf("iptables rule in %s commented %q", table, hookComment(d)))
		}
	}
	links, _ := net.Interfaces()
	for _, l := range links {
		if strings.HasPrefix(l.Name, st.Network.BridgePrefix) {
			out = append(out, "link "+l.Name)
		}
	}
	// A pod's veth outlives its bridge only while the pod's network namespace exists.
	addrs, _ := net.InterfaceAddrs()
	_, pods, _ := net.ParseCIDR(podNetwork(st.Network))
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && pods.Contains(ipn.IP) {
			out = append(out, "address "+ipn.String())
		}
	}
	return out
}
