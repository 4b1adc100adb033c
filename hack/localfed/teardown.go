package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/internal/procfs"
)

// Taking real nodes down leaves nothing behind, also after an `up` that crashed or a kubelet or
// containerd that died: once the kubelets are stopped (so nothing restarts a pod), every pod
// sandbox is stopped and removed through containerd's CRI, the way the kubelet does it (its
// containers killed, CNI DEL releasing the veth, the network namespace and the address); a
// containerd that is not running is started again for that, with its own configuration. Then
// containerd stops, any shim of ours still running is killed by pid, whatever is still mounted
// under the state directory is unmounted, a pod network namespace left with one of our addresses
// is deleted, and the bridges and iptables chains go (network.go). leftovers then checks that
// nothing of it remains.

// sweepRuntimes empties every real node's containerd.
func sweepRuntimes(ctx context.Context, d layout.Dir, st *layout.State) error {
	var errs []error
	for _, node := range st.Nodes {
		if _, err := os.Stat(node.Socket); err != nil && !nodeHasState(d, node) {
			continue // never started
		}
		if err := sweepRuntime(ctx, d, st, node); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", node.Name, err))
		}
	}
	return errors.Join(errs...)
}

func nodeHasState(d layout.Dir, node layout.Node) bool {
	_, err := os.Stat(nodeFiles{dir: d.NodeDir(node.Name)}.containerdState())
	return err == nil
}

func sweepRuntime(ctx context.Context, d layout.Dir, st *layout.State, node layout.Node) error {
	if _, alive := pidStatus(d, layout.Containerd(node.Name)); !alive {
		c, ok := st.Component(layout.Containerd(node.Name))
		if !ok {
			return nil
		}
		say("%s: starting containerd again to remove the pods it still holds", node.Name)
		r, err := start(d, c)
		if err != nil {
			return err
		}
		if err := waitReady(ctx, c.Name, time.Minute, func(ctx context.Context) error { return ctr(ctx, node.Socket, "version") }, r); err != nil {
			return err
		}
	}
	conn, err := grpc.NewClient("unix://"+node.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range list.Items {
		// A pod the kubelet was stopping as it was stopped itself can have its shim exit under
		// the call ("ttrpc: closed"); the next attempt finds it stopped.
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			if _, err = rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err))
			continue
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod %s/%s: %w", sb.Metadata.Namespace, sb.Metadata.Name, err))
		}
	}
	if len(list.Items) > 0 {
		say("%s: %d pod sandbox(es) stopped and removed", node.Name, len(list.Items))
	}
	return errors.Join(errs...)
}

// killShims kills, by pid, the containerd shims serving one of the federation's containerds.
func killShims(st *layout.State) {
	for _, pid := range shimPids(st) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// shimPids are the live containerd-shim processes whose -address is one of our sockets.
func shimPids(st *layout.State) []int {
	sockets := map[string]bool{}
	for _, n := range st.Nodes {
		sockets[n.Socket] = true
	}
	return shimPidsOf(sockets)
}

// mountsUnder are the mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(out)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll unmounts everything mounted below dir (the kubelet's root dir, the containers'
// rootfs and volumes); a busy mount is detached.
func unmountAll(dir string) error {
	var errs []error
	for _, mp := range mountsUnder(dir) {
		if err := syscall.Unmount(mp, 0); err != nil {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ourNetns are the named network namespaces (CNI's, in /run/netns) holding an address of the
// federation's pod network: a pod's, whose sandbox was not torn down.
func ourNetns(ctx context.Context, st *layout.State) []string {
	if st.Network == nil {
		return nil
	}
	_, pods, _ := net.ParseCIDR(podNetwork(st.Network))
	entries, _ := os.ReadDir("/run/netns")
	var out []string
	for _, e := range entries {
		raw, err := exec.CommandContext(ctx, "ip", "-n", e.Name(), "-4", "-o", "addr", "show").Output()
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if ip, _, err := net.ParseCIDR(f); err == nil && pods.Contains(ip) {
				out = append(out, e.Name())
				break
			}
		}
	}
	return out
}

// tearDownNodes stops what is left of the real nodes and cleans up after them, all but the
// network (removeNetwork, once the API servers listening on it are stopped); the kubelets were
// stopped by pid before (down's waves) or are dead.
func tearDownNodes(ctx context.Context, d layout.Dir, st *layout.State) error {
	if len(st.Nodes) == 0 && st.Network == nil {
		return nil
	}
	var errs []error
	if err := sweepRuntimes(ctx, d, st); err != nil {
		errs = append(errs, err)
	}
	var containerds []string
	for _, n := range st.Nodes {
		containerds = append(containerds, layout.Containerd(n.Name))
	}
	if err := stopAll(d, containerds); err != nil {
		errs = append(errs, err)
	}
	killShims(st)
	if err := unmountAll(string(d)); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range ourNetns(ctx, st) {
		if err := run(ctx, "ip", "netns", "delete", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// leftovers lists whatever of the federation still exists besides its files: processes
// (components and shims), mounts, network namespaces, links, and iptables rules and chains
// (the network's and the partitions').
func leftovers(ctx context.Context, d layout.Dir, st *layout.State) []string {
	var out []string
	for _, c := range aliveComponents(d) {
		out = append(out, "process "+c)
	}
	for _, pid := range shimPids(st) {
		out = append(out, fmt.Sprintf("containerd shim pid %d", pid))
	}
	for _, pid := range processesMentioning(string(d)) {
		out = append(out, fmt.Sprintf("process %d (its command line names %s)", pid, rel(string(d))))
	}
	for _, mp := range mountsUnder(string(d)) {
		out = append(out, "mount "+mp)
	}
	for _, ns := range ourNetns(ctx, st) {
		out = append(out, "network namespace "+ns)
	}
	out = append(out, partitionLeftovers(d, st)...)
	return append(out, networkLeftovers(ctx, d, st)...)
}

// processesMentioning are the live processes whose command line contains s, other than this one
// and those that started it (a shell running `localfed down --dir s`).
func processesMentioning(s string) []int {
	mine := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !mine[pid]; pid = parentOf(pid) {
		mine[pid] = true
	}
	var out []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || mine[pid] {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err == nil && strings.Contains(string(raw), s) && process.Running(pid, s) {
			out = append(out, pid)
		}
	}
	return out
}

// parentOf is a process's parent pid, 0 when unknown.
func parentOf(pid int) int {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return 0
	}
	return st.PPid
}
