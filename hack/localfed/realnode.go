package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/debpkg"
	"github.com/dbfleet/dbfleet/internal/process"
)

// A real node is a kubelet and a containerd of its own (root, state, socket and CRI
// configuration under nodes/<node>/), running pods with runc on the node's bridge (network.go).
// The settings are the ones seen to work on this kind of machine (docs/localfed.md): the sandbox
// may not lower oom_score_adj (restrict_oom_score_adj), the machine has cgroup v1 and no systemd
// for cgroups (cgroupfs, no QoS cgroups, no node allocatable enforcement), and the node IP is the
// bridge's address, so that kube-apiserver reaches the kubelet for logs and exec.

// pauseImage is the sandbox image hack/images builds (bin/images/pause.tar).
const pauseImage = "ghcr.io/dbfleet/pause:dev"

// agentImage carries /dbfleet-instance: the agents' --instance-image.
const agentImage = "ghcr.io/dbfleet/agent:dev"

// nodeFiles are the paths of one real node.
type nodeFiles struct{ dir string }

func (n nodeFiles) containerdConfig() string { return filepath.Join(n.dir, "containerd.toml") }
func (n nodeFiles) containerdRoot() string   { return filepath.Join(n.dir, "containerd", "root") }
func (n nodeFiles) containerdState() string  { return filepath.Join(n.dir, "containerd", "state") }
func (n nodeFiles) cniConfDir() string       { return filepath.Join(n.dir, "cni", "net.d") }
func (n nodeFiles) cniIPAMDir() string       { return filepath.Join(n.dir, "cni", "ipam") }
func (n nodeFiles) kubeletConfig() string    { return filepath.Join(n.dir, "kubelet.yaml") }
func (n nodeFiles) kubeletRoot() string      { return filepath.Join(n.dir, "kubelet") }
func (n nodeFiles) podLogs() string          { return filepath.Join(n.dir, "pod-logs") }
func (n nodeFiles) volumes() string          { return filepath.Join(n.dir, "volumes") }

// socketFor is containerd's socket; a unix socket path may not exceed 107 bytes.
func socketFor(n nodeFiles) (string, error) {
	s := filepath.Join(n.dir, "containerd.sock")
	if len(s) > 100 {
		return "", fmt.Errorf("the state directory is too deep for containerd's socket %s (%d bytes, at most 100): use a shorter --dir", s, len(s))
	}
	return s, nil
}

func containerdConfig(n nodeFiles, socket string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`, n.containerdRoot(), n.containerdState(), socket, filepath.Join(n.dir, "containerd", "opt"), pauseImage, n.cniConfDir())
}

// cniConfig attaches pods to the node's bridge, addresses from its /24, no masquerading (pods of
// different members see each other's real addresses, as pg_hba and pg_stat_replication should).
func cniConfig(n nodeFiles, node layout.Node) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "localfed-%s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    }
  ]
}
`, node.Bridge, node.Bridge, node.Subnet, node.IP, n.cniIPAMDir())
}

func kubeletConfig(n nodeFiles, node layout.Node, socket string, healthzPort int, clientCA string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
evictionHard: {}
localStorageCapacityIsolation: false
makeIPTablesUtilChains: false
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDir: %s
staticPodPath: ""
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization:
  mode: AlwaysAllow
`, node.IP, node.KubeletPort, healthzPort, socket, n.podLogs(), clientCA)
}

func containerdComponent(n nodeFiles, node layout.Node) layout.Component {
	return layout.Component{Name: layout.Containerd(node.Name), Args: []string{"/usr/bin/containerd", "--config", n.containerdConfig()}}
}

func kubeletComponent(bin, kubeconfig string, n nodeFiles, node layout.Node, m layout.Member) layout.Component {
	return layout.Component{Name: layout.Kubelet(node.Name), Args: []string{bin,
		"--config=" + n.kubeletConfig(),
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + n.kubeletRoot(),
		"--hostname-override=" + node.Name,
		"--node-ip=" + node.IP,
		"--node-labels=" + strings.Join([]string{
			"topology.kubernetes.io/region=" + m.Region,
			"topology.kubernetes.io/zone=" + m.Zone,
			"localfed.dbfleet.io/member=" + m.Name,
		}, ","),
	}}
}

// startNode starts one real node of m: its bridge (created before the member's API server, see
// planNodes), containerd with the images imported, and the kubelet; it returns once the kubelet
// runs (the Node's readiness is waited for with the others).
func (f *fed) startNode(ctx context.Context, m layout.Member, node layout.Node) error {
	n := nodeFiles{dir: f.dir.NodeDir(node.Name)}
	for _, d := range []string{n.cniConfDir(), n.cniIPAMDir(), n.kubeletRoot(), n.podLogs(), n.volumes()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	files := map[string]string{
		n.containerdConfig(): containerdConfig(n, node.Socket),
		filepath.Join(n.cniConfDir(), "10-localfed.conflist"): cniConfig(n, node),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	cd, err := f.launch(containerdComponent(n, node))
	if err != nil {
		return err
	}
	if err := waitReady(ctx, layout.Containerd(node.Name), time.Minute, func(ctx context.Context) error {
		return ctr(ctx, node.Socket, "version")
	}, cd); err != nil {
		return err
	}
	if err := f.importImages(ctx, node); err != nil {
		return err
	}
	p := clusterPKI{dir: f.dir.PKI(m.Name)}
	return process.RetryOnPortConflict(portAttempts, func() error {
		ports, err := process.ReservePorts(2)
		if err != nil {
			return err
		}
		node.KubeletPort = ports[0].Number()
		f.mu.Lock()
		for i := range f.st.Nodes {
			if f.st.Nodes[i].Name == node.Name {
				f.st.Nodes[i].KubeletPort = node.KubeletPort
			}
		}
		f.mu.Unlock()
		if err := os.WriteFile(n.kubeletConfig(), []byte(kubeletConfig(n, node, node.Socket, ports[1].Number(), p.kubeletClientCA())), 0o600); err != nil {
			process.ReleaseAll(ports)
			return err
		}
		r, err := f.launch(kubeletComponent(f.bins.kubelet, f.dir.Kubeconfig(m.Name), n, node, m), ports...)
		if err != nil {
			return err
		}
		return waitReady(ctx, r.Name(), 2*time.Minute, process.HTTPOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[1].Number())), r)
	})
}

// ctr runs containerd's client against a node's containerd, in the CRI's namespace.
func ctr(ctx context.Context, socket string, args ...string) error {
	return run(ctx, "ctr", append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)...)
}

// memberImages are the archives of bin/images a member's nodes import: the sandbox, the engine and
// the agent's (dbfleet-instance); pods use them with imagePullPolicy IfNotPresent, and nothing is
// pulled from a registry.
var memberImages = []string{"pause.tar", "postgres-15.tar", "agent.tar"}

// hubImages are the archives the hub cluster's node imports (--hub-node): the sandbox and the
// hub's, for a hub installed as pods (the Helm chart, with the image's pull policy Never or
// IfNotPresent).
var hubImages = []string{"pause.tar", "hub.tar"}

// importImages imports memberImages (hubImages on the hub's node) into the node's containerd.
func (f *fed) importImages(ctx context.Context, node layout.Node) error {
	images := memberImages
	if node.Member == layout.HubCluster {
		images = hubImages
	}
	var archives []string
	for _, a := range images {
		archives = append(archives, filepath.Join(f.bins.images, a))
	}
	start := time.Now()
	for _, a := range archives {
		if err := ctr(ctx, node.Socket, "images", "import", a); err != nil {
			return fmt.Errorf("%s: import %s: %w", node.Name, rel(a), err)
		}
	}
	say("%s: containerd running, %d images imported from %s in %s", node.Name, len(archives), rel(f.bins.images), time.Since(start).Round(100*time.Millisecond))
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// hostTools are the programs real nodes need from the host, with the Debian package of each.
var hostTools = []struct{ path, pkg string }{
	{"/usr/bin/containerd", "containerd"},
	{"/usr/bin/ctr", "containerd"},
	{"/usr/sbin/runc", "runc"},
	{"/usr/lib/cni/bridge", "containernetworking-plugins"},
	{"/usr/lib/cni/host-local", "containernetworking-plugins"},
	{"/usr/sbin/iptables", "iptables"},
}

// kwokHint is how to choose fake nodes instead.
const kwokHint = "or run with fake nodes, which run no containers: bin/localfed up --nodes kwok (make localfed-up LOCALFED_FLAGS=\"--nodes kwok\")"

// ensureHostTools installs the missing Debian packages when running as root, and says why real
// nodes cannot run otherwise.
func ensureHostTools(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("real nodes need root (kubelet, containerd, bridges and iptables rules); run as root, %s", kwokHint)
	}
	var missing []string
	for _, t := range hostTools {
		if _, err := os.Stat(t.path); err != nil && !slices.Contains(missing, t.pkg) {
			missing = append(missing, t.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	say("installing the Debian packages real nodes need: %s (apt-get, as root)", strings.Join(missing, " "))
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("real nodes need %s and there is no apt-get to install them: install them, %s", strings.Join(missing, ", "), kwokHint)
	}
	if err := debpkg.Install(ctx, missing...); err != nil {
		return fmt.Errorf("%w; %s", err, kwokHint)
	}
	// The Debian package starts a containerd of its own on /run/containerd; localfed's nodes do
	// not use it and leave it alone.
	return nil
}

// planNodes names the real nodes of every member and picks their network.
func (f *fed) planNodes() error {
	n, err := pickNetwork()
	if err != nil {
		return err
	}
	f.st.Network = n
	planObjectStore(n)
	if total := len(f.st.Members) * f.nodesPerMember; total >= storeNodeIndex {
		return fmt.Errorf("%d real nodes: at most %d fit the pod network's plan", total, storeNodeIndex-1)
	}
	k := 0
	for _, m := range f.st.Members {
		for i := range f.nodesPerMember {
			k++
			node := layout.Node{Name: fmt.Sprintf("%s-node-%d", m.Name, i), Member: m.Name}
			planNode(n, k, &node)
			socket, err := socketFor(nodeFiles{dir: f.dir.NodeDir(node.Name)})
			if err != nil {
				return err
			}
			node.Socket = socket
			f.st.Nodes = append(f.st.Nodes, node)
		}
	}
	if f.st.HubNode {
		// After the members' nodes, so theirs keep the bridges and subnets they have without it.
		k++
		node := layout.Node{Name: layout.HubCluster + "-node-0", Member: layout.HubCluster}
		planNode(n, k, &node)
		socket, err := socketFor(nodeFiles{dir: f.dir.NodeDir(node.Name)})
		if err != nil {
			return err
		}
		node.Socket = socket
		f.st.Nodes = append(f.st.Nodes, node)
	}
	return nil
}

// createNodeNetwork creates the chains and every node's bridge (the API servers bind to them).
func (f *fed) createNodeNetwork(ctx context.Context) error {
	if f.st.Network == nil {
		return nil
	}
	if err := createNetwork(ctx, f.dir, f.st.Network); err != nil {
		return err
	}
	for _, node := range f.st.Nodes {
		if err := createBridge(ctx, node); err != nil {
			return err
		}
	}
	say("pod network %s: one bridge per node (%s1..%d), pods route between members", podNetwork(f.st.Network), f.st.Network.BridgePrefix, len(f.st.Nodes))
	return nil
}

// startRealMember starts the member's controller manager and scheduler, then its nodes, and
// waits until every Node is Ready and schedulable.
func (f *fed) startRealMember(ctx context.Context, m layout.Member, components []layout.Component) error {
	var procs []*process.Process
	for _, c := range components {
		r, err := f.launch(c)
		if err != nil {
			return err
		}
		procs = append(procs, r)
	}
	server, err := url.Parse(f.st.Servers[m.Name])
	if err != nil {
		return err
	}
	nodes := f.st.NodesOf(m.Name)
	steps := make([]func(context.Context) error, 0, len(nodes))
	for _, node := range nodes {
		steps = append(steps, func(ctx context.Context) error {
			if err := routeKubernetesService(ctx, f.st.Network, node, server.Host); err != nil {
				return err
			}
			return f.startNode(ctx, m, node)
		})
	}
	if err := all(ctx, steps...); err != nil {
		return err
	}
	cs, err := clientFor(f.dir.Kubeconfig(m.Name))
	if err != nil {
		return err
	}
	volumes := f.volumes
	if m.Name == layout.HubCluster {
		volumes = 0 // the hub keeps no data in volumes
	}
	if err := createRealVolumes(ctx, cs, f.dir, nodes, volumes); err != nil {
		return fmt.Errorf("%s: volumes: %w", m.Name, err)
	}
	for _, node := range nodes {
		procs = append(procs, f.procs[layout.Kubelet(node.Name)], f.procs[layout.Containerd(node.Name)])
	}
	if err := waitReady(ctx, m.Name+"'s nodes", 2*time.Minute, nodesSchedulable(cs, len(nodes)), procs...); err != nil {
		return err
	}
	say("%s: %d real node(s) Ready (%s/%s), %d volumes", m.Name, len(nodes), m.Region, m.Zone, volumes)
	return nil
}
