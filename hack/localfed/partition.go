package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
)

// A partition (`localfed partition MEMBER`, undone by `localfed heal MEMBER`) cuts one member
// off the rest of the federation while all its processes keep running, as a network split
// would. It is two chains of ours per member in the filter table, each reached from built-in
// chains by one rule commented "localfed <state dir> partition <member>":
//
//   - DBFLEET-PODS-<h> (real nodes only), from FORWARD, INPUT and OUTPUT: traffic among the
//     member's own node subnets returns (its pods, and its node addresses, where its API server
//     and kubelets listen); whatever else of the pod network is dropped, both ways. Pods of
//     other members are across bridges (FORWARD); other nodes' addresses, where the other API
//     servers listen (the hub's too with --hub-node, for an agent run as a pod), are the host's
//     (INPUT, and OUTPUT for their replies).
//   - DBFLEET-HUB-<h>, from OUTPUT: drops every packet of the agent's connections to the address
//     and port its hub kubeconfig names, the agent's and the hub's replies alike (over loopback
//     both are sent by this host and pass OUTPUT).
//
// The agent is a local process that reaches the hub API server as the hub and every other agent
// do, so addresses alone cannot tell its connections apart. up therefore runs each agent with a
// group of its own (agentGroup), and a chain of ours in the mangle table, DBFLEET-AGENTS-<h>
// from OUTPUT (agentMarkRules), marks every connection an agent opens with its member's mark
// (CONNMARK), for as long as the federation runs. A partition drops by that mark, so it cuts
// connections opened before it at once, in both directions: matching the agent's packets alone
// would let the hub's data on an idle watch through until the agent next sent on it.
//
// DROP, not REJECT: packets vanish and connections time out, as in a real split. <h> is a hash
// of the state directory (and the member), so that two federations side by side have chains of
// their own and a chain name stays within iptables' 28 characters whatever the member's name.

// agentGroupBase + i is the group of the i-th member's agent. The number only has to differ
// between one federation's agents: the rule that cuts a connection by its mark also names that
// federation's hub address and port, so another process in the same group is never cut.
const agentGroupBase = 46100

// partitionMarkMask holds the agents' connection marks: member i's agent marks (i+1)<<24, so a
// partition of one member leaves the others' connections alone.
const partitionMarkMask = 0x0f000000

// agentMark is the connection mark of the i-th member's agent.
func agentMark(i int) uint32 { return uint32(i+1) << 24 }

func markArg(mark uint32) string { return fmt.Sprintf("0x%x/0x%x", mark, partitionMarkMask) }

// agentsOwnGroups: only root may start a process with another group and mark connections (and
// fake nodes do not need iptables installed), so only then do the agents get groups of their
// own, and their connections are marked.
func agentsOwnGroups() bool {
	_, err := exec.LookPath("iptables")
	return os.Geteuid() == 0 && err == nil
}

// agentGroup is the group the member's agent runs with; 0 (no group of its own, no partition
// of its hub traffic) when it cannot have one.
func (f *fed) agentGroup(member string) int {
	i := slices.Index(f.st.MemberNames(), member)
	if !agentsOwnGroups() || i < 0 {
		return 0
	}
	return agentGroupBase + i
}

// agentMarksChain is the mangle chain that marks the agents' connections, and agentMarksComment
// the comment of its hook in OUTPUT.
func agentMarksChain(d layout.Dir) string {
	sum := sha256.Sum256([]byte(d))
	return "DBFLEET-AGENTS-" + strings.ToUpper(hex.EncodeToString(sum[:4]))
}

func agentMarksComment(d layout.Dir) string { return hookComment(d) + " agents" }

// agentMarkRules mark every connection of the first n members' agents with its member's mark,
// by the agent's group (the arguments after "-A <chain>").
func agentMarkRules(n int) [][]string {
	var out [][]string
	for i := range n {
		out = append(out, []string{"-m", "owner", "--gid-owner", strconv.Itoa(agentGroupBase + i),
			"-j", "CONNMARK", "--set-xmark", markArg(agentMark(i))})
	}
	return out
}

// createAgentMarks creates the chain that marks the agents' connections, before they start, so
// that even their first connections are marked.
func createAgentMarks(ctx context.Context, d layout.Dir, members int) error {
	if err := removeAgentMarks(ctx, d); err != nil { // left by a run whose state directory went
		return err
	}
	chain := agentMarksChain(d)
	if err := iptables(ctx, "mangle", "-N", chain); err != nil {
		return err
	}
	for _, r := range agentMarkRules(members) {
		if err := iptables(ctx, "mangle", append([]string{"-A", chain}, r...)...); err != nil {
			return err
		}
	}
	return iptables(ctx, "mangle", append([]string{"-I", "OUTPUT", "1"}, hookArgs(agentMarksComment(d), chain)...)...)
}

// removeAgentMarks removes that chain and its hook; what is gone already is not an error.
func removeAgentMarks(ctx context.Context, d layout.Dir) error {
	if !agentsOwnGroups() {
		return nil
	}
	chain := agentMarksChain(d)
	for iptables(ctx, "mangle", append([]string{"-D", "OUTPUT"}, hookArgs(agentMarksComment(d), chain)...)...) == nil {
	}
	if !chainExists(ctx, "mangle", chain) {
		return nil
	}
	if err := iptables(ctx, "mangle", "-F", chain); err != nil {
		return err
	}
	return iptables(ctx, "mangle", "-X", chain)
}

// partitionPlan is what partitioning one member cuts.
type partitionPlan struct {
	member string
	// from, when set, is the one other member whose pods alone are cut from member's (a partial
	// partition, `partition MEMBER --from OTHER`): otherSubnets are its node subnets, and nothing
	// else is cut (the agent keeps the hub).
	from         string
	otherSubnets []string
	comment      string // on each hook
	// ownSubnets are the member's node subnets; podNetwork is the federation's (empty with kwok).
	ownSubnets []string
	podNetwork string
	// agentGroup is its agent's group, 0 when there is no agent process to cut; hubIP and
	// hubPort are where that agent reaches the hub; mark its connections' mark (agentMark).
	agentGroup int
	hubIP      string
	hubPort    string
	mark       uint32
	podsChain  string
	hubChain   string
}

// partitionChain is one chain of ours in the filter table: its rules (the arguments after
// "-A <name>"), and the built-in chains that jump to it.
type partitionChain struct {
	name  string
	hooks []string
	rules [][]string
}

// chains are the iptables chains that make p's partition, in the order to create them.
func (p partitionPlan) chains() []partitionChain {
	var out []partitionChain
	if p.from != "" {
		if len(p.ownSubnets) == 0 || len(p.otherSubnets) == 0 {
			return nil
		}
		c := partitionChain{name: p.podsChain, hooks: []string{"FORWARD", "INPUT", "OUTPUT"}}
		for _, own := range p.ownSubnets {
			for _, other := range p.otherSubnets {
				c.rules = append(c.rules,
					[]string{"-s", own, "-d", other, "-j", "DROP"},
					[]string{"-s", other, "-d", own, "-j", "DROP"})
			}
		}
		return append(out, c)
	}
	if p.podNetwork != "" && len(p.ownSubnets) > 0 {
		c := partitionChain{name: p.podsChain, hooks: []string{"FORWARD", "INPUT", "OUTPUT"}}
		// Its own subnets first: a member with several nodes routes between their bridges.
		for _, from := range p.ownSubnets {
			for _, to := range p.ownSubnets {
				c.rules = append(c.rules, []string{"-s", from, "-d", to, "-j", "RETURN"})
			}
		}
		for _, own := range p.ownSubnets {
			c.rules = append(c.rules,
				[]string{"-s", own, "-d", p.podNetwork, "-j", "DROP"},
				[]string{"-s", p.podNetwork, "-d", own, "-j", "DROP"})
		}
		out = append(out, c)
	}
	if p.agentGroup != 0 {
		out = append(out, partitionChain{name: p.hubChain, hooks: []string{"OUTPUT"}, rules: [][]string{
			{"-p", "tcp", "-m", "conntrack", "--ctorigdst", p.hubIP, "--ctorigdstport", p.hubPort,
				"-m", "connmark", "--mark", markArg(p.mark), "-j", "DROP"},
		}})
	}
	return out
}

// hookArgs are the arguments after "-I <builtin> 1", "-C <builtin>" or "-D <builtin>" of the
// rule that jumps to chain.
func hookArgs(comment, chain string) []string {
	return []string{"-m", "comment", "--comment", comment, "-j", chain}
}

// partitionKey names a partition: member's, or member's from other (a partial one).
func partitionKey(member, from string) string {
	if from == "" {
		return member
	}
	return member + " from " + from
}

// partitionComment marks the hooks of a partition's chains (key: partitionKey).
func partitionComment(d layout.Dir, key string) string {
	return hookComment(d) + " partition " + key
}

// partitionChainNames are the names of a partition's two chains (key: partitionKey).
func partitionChainNames(d layout.Dir, key string) (pods, hub string) {
	sum := sha256.Sum256([]byte(string(d) + "\x00" + key))
	h := strings.ToUpper(hex.EncodeToString(sum[:4]))
	return "DBFLEET-PODS-" + h, "DBFLEET-HUB-" + h
}

// memberIndex is member's index in st, or an error naming the members.
func memberIndex(st *layout.State, member string) (int, error) {
	i := slices.Index(st.MemberNames(), member)
	if i < 0 {
		return 0, fmt.Errorf("no member %q; the members are %s", member, strings.Join(st.MemberNames(), ", "))
	}
	return i, nil
}

// planPartition reads what partitioning member cuts from the state directory: from every other
// member and the hub, or with from set, from that member's pods only.
func planPartition(d layout.Dir, st *layout.State, member, from string) (partitionPlan, error) {
	i, err := memberIndex(st, member)
	if err != nil {
		return partitionPlan{}, err
	}
	key := partitionKey(member, from)
	p := partitionPlan{member: member, from: from, comment: partitionComment(d, key), mark: agentMark(i)}
	p.podsChain, p.hubChain = partitionChainNames(d, key)
	if from != "" {
		if _, err := memberIndex(st, from); err != nil {
			return p, err
		}
		if from == member {
			return p, fmt.Errorf("a member cannot be cut from itself (%s)", member)
		}
		for _, n := range st.NodesOf(member) {
			p.ownSubnets = append(p.ownSubnets, n.Subnet)
		}
		for _, n := range st.NodesOf(from) {
			p.otherSubnets = append(p.otherSubnets, n.Subnet)
		}
		return p, nil
	}
	if st.Network != nil {
		p.podNetwork = podNetwork(st.Network)
		for _, n := range st.NodesOf(member) {
			p.ownSubnets = append(p.ownSubnets, n.Subnet)
		}
	}
	agent, ok := st.Component(layout.Agent(member))
	if !ok {
		return p, nil // --no-dbfleet: an agent run as a pod is cut with the member's pods
	}
	if agent.Group == 0 {
		return p, fmt.Errorf("%s runs without a group of its own (localfed up ran without root or iptables, or predates partition), "+
			"so its connections to the hub cannot be told from the others': bring the federation up again as root", agent.Name)
	}
	p.agentGroup = agent.Group
	p.hubIP, p.hubPort, err = hubAddress(d.AgentHubKubeconfig(member))
	if err != nil {
		return p, fmt.Errorf("%s: %w", agent.Name, err)
	}
	return p, nil
}

// hubAddress is the IPv4 address and port of the hub API server in an agent's hub kubeconfig:
// where the agent connects, whether the hub's own port or a proxy's in between.
func hubAddress(kubeconfig string) (ip, port string, err error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", "", err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", "", fmt.Errorf("%s: server %q: %w", rel(kubeconfig), cfg.Host, err)
	}
	port = u.Port()
	if port == "" {
		port = "443"
	}
	if addr := net.ParseIP(u.Hostname()); addr == nil || addr.To4() == nil {
		return "", "", fmt.Errorf("%s: server %q is not an IPv4 address, which the partition rules need", rel(kubeconfig), cfg.Host)
	}
	return u.Hostname(), port, nil
}

// iptables runs iptables on a table, waiting for its lock.
func iptables(ctx context.Context, table string, args ...string) error {
	return run(ctx, "iptables", append([]string{"-w", "-t", table}, args...)...)
}

// partitionMember cuts member off the federation, or with from set its pods from that member's
// pods only; a partition already in place stays so.
func partitionMember(d layout.Dir, member, from string) error {
	st, err := d.Load()
	if err != nil {
		return err
	}
	p, err := planPartition(d, st, member, from)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("partition needs root (iptables rules)")
	}
	chains := p.chains()
	if len(chains) == 0 && from != "" {
		return fmt.Errorf("nothing to cut: %s or %s has fake nodes (kwok)", member, from)
	}
	if len(chains) == 0 {
		return fmt.Errorf("nothing to cut: %s has fake nodes (kwok) and no agent process", member)
	}
	key := partitionKey(member, from)
	ctx := context.Background()
	if p.agentGroup != 0 && !chainExists(ctx, "mangle", agentMarksChain(d)) {
		return fmt.Errorf("the chain that marks the agents' connections (mangle %s) is gone, so %s's cannot be told apart: "+
			"bring the federation up again", agentMarksChain(d), layout.Agent(member))
	}
	if partitionComplete(ctx, p.comment, chains) {
		say("%s: already partitioned", key)
		return nil
	}
	// What an interrupted partition left goes first; the hooks come last, so the cut starts
	// whole.
	if err := healPartition(d, key); err != nil {
		return err
	}
	for _, c := range chains {
		if err := iptables(ctx, "filter", "-N", c.name); err != nil {
			return err
		}
		for _, r := range c.rules {
			if err := iptables(ctx, "filter", append([]string{"-A", c.name}, r...)...); err != nil {
				return err
			}
		}
	}
	for _, c := range chains {
		for _, builtin := range c.hooks {
			if err := iptables(ctx, "filter", append([]string{"-I", builtin, "1"}, hookArgs(p.comment, c.name)...)...); err != nil {
				return err
			}
		}
	}
	undo := member
	if from != "" {
		undo += " --from " + from
	}
	say("%s: partitioned: %s; bin/localfed heal %s undoes it", key, describeCut(p), undo)
	return nil
}

// describeCut says what p cuts, for people.
func describeCut(p partitionPlan) string {
	if p.from != "" {
		return fmt.Sprintf("its pods (%s) from %s's pods (%s), both ways; everything else as it was", strings.Join(p.ownSubnets, ", "), p.from, strings.Join(p.otherSubnets, ", "))
	}
	var what []string
	if p.podNetwork != "" && len(p.ownSubnets) > 0 {
		what = append(what, fmt.Sprintf("its pods (%s) from the rest of %s, both ways", strings.Join(p.ownSubnets, ", "), p.podNetwork))
	}
	if p.agentGroup != 0 {
		what = append(what, fmt.Sprintf("its agent (group %d) from the hub API server at %s", p.agentGroup, net.JoinHostPort(p.hubIP, p.hubPort)))
	}
	return strings.Join(what, "; ")
}

// partitionComplete reports whether every rule and hook of chains is in place.
func partitionComplete(ctx context.Context, comment string, chains []partitionChain) bool {
	for _, c := range chains {
		for _, r := range c.rules {
			if iptables(ctx, "filter", append([]string{"-C", c.name}, r...)...) != nil {
				return false
			}
		}
		for _, builtin := range c.hooks {
			if iptables(ctx, "filter", append([]string{"-C", builtin}, hookArgs(comment, c.name)...)...) != nil {
				return false
			}
		}
	}
	return true
}

// partitionHooks are every built-in chain a partition chain may hang off.
var partitionHooks = []string{"FORWARD", "INPUT", "OUTPUT"}

// healMember removes member's partitions, whole and partial (from any other member of st),
// whatever of them exists; a member not partitioned is healed already.
func healMember(d layout.Dir, st *layout.State, member string) error {
	errs := []error{healPartition(d, member)}
	for _, other := range st.MemberNames() {
		if other != member {
			errs = append(errs, healPartition(d, partitionKey(member, other)))
		}
	}
	return errors.Join(errs...)
}

// healPartition removes one partition (key: partitionKey), whatever of it exists.
func healPartition(d layout.Dir, key string) error {
	ctx := context.Background()
	comment := partitionComment(d, key)
	pods, hub := partitionChainNames(d, key)
	var errs []error
	for _, chain := range []string{pods, hub} {
		for _, builtin := range partitionHooks {
			for iptables(ctx, "filter", append([]string{"-D", builtin}, hookArgs(comment, chain)...)...) == nil {
			}
		}
		if !chainExists(ctx, "filter", chain) {
			continue
		}
		if err := iptables(ctx, "filter", "-F", chain); err != nil {
			errs = append(errs, err)
		}
		if err := iptables(ctx, "filter", "-X", chain); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// healCommand is `localfed heal MEMBER [--from OTHER]`: without from, every partition of
// member's, whole or partial.
func healCommand(d layout.Dir, member, from string) error {
	st, err := d.Load()
	if err != nil {
		return err
	}
	if _, err := memberIndex(st, member); err != nil {
		return err
	}
	if from != "" {
		if _, err := memberIndex(st, from); err != nil {
			return err
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("heal needs root (iptables rules)")
	}
	key := partitionKey(member, from)
	var was bool
	if from != "" {
		was = partitioned(d, key)
		err = healPartition(d, key)
	} else {
		was = len(partitionedMembers(d, st, []string{member})) > 0
		err = healMember(d, st, member)
	}
	if err != nil {
		return err
	}
	if !was {
		say("%s: not partitioned", key)
		return nil
	}
	say("%s: healed (its partition rules and chains removed)", key)
	return nil
}

// healAll removes every member's partition and the agents' marks (down).
func healAll(d layout.Dir, st *layout.State) error {
	if !agentsOwnGroups() {
		return nil // not root: none was made
	}
	var errs []error
	cut := partitionedMembers(d, st, st.MemberNames())
	for _, m := range st.MemberNames() {
		if err := healMember(d, st, m); err != nil {
			errs = append(errs, fmt.Errorf("heal %s: %w", m, err))
		}
	}
	if len(cut) > 0 && len(errs) == 0 {
		say("partitions removed: %s", strings.Join(cut, ", "))
	}
	if err := removeAgentMarks(context.Background(), d); err != nil {
		errs = append(errs, fmt.Errorf("the agents' connection marks: %w", err))
	}
	return errors.Join(errs...)
}

// partitionedMembers are the partitions of members that exist (their partitionKey: "west", or
// "west from east" for a partial one); none when iptables cannot be read (not root).
func partitionedMembers(d layout.Dir, st *layout.State, members []string) []string {
	var out []string
	for _, m := range members {
		if partitioned(d, m) {
			out = append(out, m)
		}
		for _, other := range st.MemberNames() {
			if key := partitionKey(m, other); other != m && partitioned(d, key) {
				out = append(out, key)
			}
		}
	}
	return out
}

// partitioned says a chain of the partition (key: partitionKey) exists.
func partitioned(d layout.Dir, key string) bool {
	ctx := context.Background()
	pods, hub := partitionChainNames(d, key)
	return chainExists(ctx, "filter", pods) || chainExists(ctx, "filter", hub)
}

// partitionLeftovers lists the partition chains of st's members, and the agents' marks chain,
// that still exist.
func partitionLeftovers(d layout.Dir, st *layout.State) []string {
	if !agentsOwnGroups() {
		return nil // not root: none was made
	}
	var out []string
	for _, m := range partitionedMembers(d, st, st.MemberNames()) {
		out = append(out, "partition chains of "+m)
	}
	if chainExists(context.Background(), "mangle", agentMarksChain(d)) {
		out = append(out, "iptables chain mangle/"+agentMarksChain(d))
	}
	return out
}
