// Command localfed runs a local federation for dbfleet: one etcd, a hub kube-apiserver with the
// dbfleet CRDs and `hub run`, and member clusters (kube-apiserver, kube-controller-manager,
// kube-scheduler and real nodes: a kubelet and containerd each, pods running with runc; or kwok
// with fake Nodes), each joined with `hub join` and served by an agent running as a local
// process. Every process runs detached with a pid file, so the federation outlives the command
// and is stopped by pid. See docs/localfed.md.
//
//	localfed up [--members east,west,central] [--nodes real|kwok] [--nodes-per-member 1] [--cluster-grace-period 20s] [--heartbeat-interval 5s] [--fence-after 15s] [--volumes 60] [--hub-node] [--no-dbfleet]
//	localfed down
//	localfed status
//	localfed stop COMPONENT     # e.g. agent-west: a fault to watch
//	localfed start COMPONENT [ARG...]  # start it again, with the command up used (plus ARGs, this once)
//	localfed kill MEMBER        # kill a whole member at once (its processes and containers, SIGKILL); start its components again to bring it back
//	localfed kill-node NODE     # kill one node (its kubelet, containerd and containers); its member's API server and agent run on
//	localfed partition MEMBER   # cut a member's pods from the other members' and its agent from the hub (iptables DROP)
//	localfed partition MEMBER --from OTHER  # cut its pods from OTHER's pods only (the agent keeps the hub)
//	localfed heal MEMBER [--from OTHER]     # remove its partitions (or that one)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

const usage = `usage: localfed COMMAND [flags]

  up       start the federation in the background; returns once every MemberCluster is Ready
  down     stop every process by its pid file and remove the state directory
  status   print each process, its pid and whether it is alive; exits 1 when some
           are not running, 3 when none is
  stop C   stop component C (e.g. agent-west, apiserver-east) by its pid file
  start C [ARG...]
           start component C again with the command up used, ARGs appended for this run
           only (e.g. start agent-west --clock-offset=1h)
  kill M   kill member M whole, as a power cut would (SIGKILL to its API server, controller
           manager, scheduler, agent, kubelets, containerds and every container on its nodes);
           prints the components to start again, in order
  kill-node N
           kill node N alone, as a lost machine (SIGKILL to its kubelet, its containerd and
           every container on it); its member's API server and agent run on
  partition M
           cut member M off, everything kept running: its pods from every other member's
           pods (both ways) and its agent from the hub API server, by iptables rules that drop
           the packets; as root
           --from O cuts M's pods from member O's pods only, both ways, and nothing else
  heal M   remove member M's partitions (--from O: that one only)

Run 'localfed COMMAND -h' for the flags of a command.
`

// defaultMembers are the members of --members N, in order.
var defaultMembers = []layout.Member{
	{Name: "east", Region: "us-east", Zone: "us-east-1a"},
	{Name: "west", Region: "us-west", Zone: "us-west-2a"},
	{Name: "central", Region: "eu-central", Zone: "eu-central-1a"},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	prefix = "localfed " + cmd
	fs := flag.NewFlagSet("localfed "+cmd, flag.ExitOnError)
	dirFlag := fs.String("dir", layout.DefaultDir, "state directory")
	binFlag := fs.String("bin", "bin", "directory of hub and agent; the Kubernetes binaries are in its k8s/")
	var o upOptions
	var members string
	if cmd == "up" {
		o.addFlags(fs, &members)
	}
	var from string
	if cmd == "partition" || cmd == "heal" {
		fs.StringVar(&from, "from", "", "cut (or heal) the member's pods from this one member's pods only, and nothing else")
	}
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	dir, err := filepath.Abs(*dirFlag)
	if err != nil {
		fail(err)
	}
	d := layout.Dir(dir)
	switch cmd {
	case "up":
		if err := o.complete(members); err != nil {
			fail(err)
		}
		bin, err := filepath.Abs(*binFlag)
		if err != nil {
			fail(err)
		}
		crds, _ := filepath.Abs(filepath.Join("deploy", "crds"))
		bins, err := findBinaries(bin, crds, o)
		if err != nil {
			fail(err)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := up(ctx, d, bins, o); err != nil {
			if errors.Is(err, errAlreadyRunning) {
				os.Exit(1)
			}
			fail(err)
		}
	case "down":
		err = down(d, true)
	case "status":
		err = status(d)
	case "kill":
		if fs.NArg() != 1 {
			fail(fmt.Errorf("kill takes one member, e.g. west"))
		}
		err = killMember(d, fs.Arg(0))
	case "kill-node":
		if fs.NArg() != 1 {
			fail(fmt.Errorf("kill-node takes one node, e.g. west-node-0 (see localfed status)"))
		}
		err = killNode(d, fs.Arg(0))
	case "partition", "heal":
		rest := fs.Args()
		if len(rest) > 1 { // flags after the member: partition west --from east
			if err := fs.Parse(rest[1:]); err != nil {
				os.Exit(2)
			}
			rest = append(rest[:1:1], fs.Args()...)
		}
		if len(rest) != 1 {
			fail(fmt.Errorf("%s takes one member, e.g. west (and --from east to cut it from that member's pods only)", cmd))
		}
		if cmd == "partition" {
			err = partitionMember(d, rest[0], from)
		} else {
			err = healCommand(d, rest[0], from)
		}
	case "start", "stop":
		if fs.NArg() < 1 || (cmd == "stop" && fs.NArg() != 1) {
			fail(fmt.Errorf("%s takes one component, e.g. agent-west (see localfed status)", cmd))
		}
		if cmd == "start" {
			err = startComponent(d, fs.Arg(0), fs.Args()[1:]...)
		} else {
			err = stopComponent(d, fs.Arg(0))
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n%s", cmd, usage)
		os.Exit(2)
	}
	if errors.Is(err, errNothingRuns) {
		fmt.Fprintf(os.Stderr, "localfed: %v\n", err)
		os.Exit(3)
	}
	if err != nil {
		fail(err)
	}
}

// addFlags registers the flags of `localfed up`; members receives --members, which complete
// parses.
func (o *upOptions) addFlags(fs *flag.FlagSet, members *string) {
	fs.StringVar(members, "members", "3", "the member clusters: a count (of east, west, central, then member4...), "+
		"or names, each optionally name=region/zone, e.g. east,lab=on-prem/rack-1")
	fs.DurationVar(&o.gracePeriod, "cluster-grace-period", 20*time.Second, "hub run --cluster-grace-period")
	fs.DurationVar(&o.heartbeatInterval, "heartbeat-interval", 5*time.Second, "the agents' --heartbeat-interval (and hub join's)")
	fs.DurationVar(&o.fenceAfter, "fence-after", 15*time.Second, "the agents' --fence-after (and hub join's)")
	fs.IntVar(&o.volumes, "volumes", 60, "PersistentVolumes made for each member (each replica that ever existed keeps one)")
	fs.StringVar(&o.nodes, "nodes", realNodes, "the members' nodes: real (kubelet, containerd and runc; pods run as containers; needs root and Linux) "+
		"or kwok (fake nodes whose pods run nothing: for scale, and for machines where real ones cannot run)")
	fs.IntVar(&o.nodesPerMember, "nodes-per-member", 1, "nodes in each member cluster")
	fs.BoolVar(&o.hubNode, "hub-node", false, "give the hub cluster a real node, a controller manager and a scheduler, "+
		"with the hub image imported (bin/images/hub.tar), so the hub can run there as pods (real nodes only)")
	fs.BoolVar(&o.noDBFleet, "no-dbfleet", false, "start the clusters only: no CRDs, no hub, no join and no agents "+
		"(install dbfleet yourself, e.g. with the Helm charts)")
}

// complete sets o.members from --members and checks the flags of `localfed up`.
func (o *upOptions) complete(members string) error {
	var err error
	if o.members, err = parseMembers(members); err != nil {
		return fmt.Errorf("--members: %w", err)
	}
	if o.volumes < 0 {
		return fmt.Errorf("--volumes must not be negative, got %d", o.volumes)
	}
	if o.nodes != realNodes && o.nodes != kwokNodes {
		return fmt.Errorf("--nodes must be %s or %s, got %q", realNodes, kwokNodes, o.nodes)
	}
	if o.nodesPerMember < 1 || o.nodesPerMember > 9 {
		return fmt.Errorf("--nodes-per-member must be 1 to 9, got %d", o.nodesPerMember)
	}
	if o.hubNode && o.nodes != realNodes {
		return fmt.Errorf("--hub-node needs --nodes %s", realNodes)
	}
	return nil
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "localfed: %v\n", err)
	os.Exit(1)
}

// parseMembers reads --members: a count, or a list of name[=region/zone].
func parseMembers(s string) ([]layout.Member, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > 9 {
			return nil, fmt.Errorf("a count must be 1 to 9, got %d", n)
		}
		var out []layout.Member
		for i := range n {
			if i < len(defaultMembers) {
				out = append(out, defaultMembers[i])
				continue
			}
			region := fmt.Sprintf("region-%d", i+1)
			out = append(out, layout.Member{Name: fmt.Sprintf("member%d", i+1), Region: region, Zone: region + "a"})
		}
		return out, nil
	}
	var out []layout.Member
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		name, where, hasWhere := strings.Cut(strings.TrimSpace(item), "=")
		if !validName(name) || name == layout.HubCluster {
			return nil, fmt.Errorf("%q is not a member name (lowercase letters, digits and '-', not 'hub')", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("%q given twice", name)
		}
		seen[name] = true
		m := layout.Member{Name: name, Region: name, Zone: name + "-a"}
		for _, def := range defaultMembers {
			if def.Name == name {
				m = def
			}
		}
		if hasWhere {
			region, zone, ok := strings.Cut(where, "/")
			if !ok || region == "" || zone == "" {
				return nil, fmt.Errorf("%q: want name=region/zone", item)
			}
			m.Region, m.Zone = region, zone
		}
		out = append(out, m)
	}
	return out, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 40 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return false
		}
	}
	return true
}
