package install

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/pkg/images"
	"github.com/dbfleet/dbfleet/test/framework"
)

const (
	// systemNamespace is where both charts put dbfleet, whatever the release's namespace.
	systemNamespace = "dbfleet-system"
	// hubName is the hub's Deployment and its leader-election Lease (the chart's defaults).
	hubName = "dbfleet-hub"
	// localTag is the tag make images gives the hub and agent images; upgradeTag the rebuilt
	// hub's.
	localTag   = "dev"
	upgradeTag = "install-test-upgrade"
	// dbNamespace and dbName are the test's database on the hub.
	dbNamespace = "install"
	dbName      = "orders"
)

// TestHelmInstall installs the hub and the agents with their charts, places a database, kills
// the leading hub replica and upgrades the hub to a rebuilt image, checking after each that the
// database stayed where it was.
func TestHelmInstall(t *testing.T) {
	hub := newClient(t, layout.HubCluster)
	clusters := map[string]client.Client{}
	for _, m := range members {
		clusters[m.Name] = newClient(t, m.Name)
	}
	st, err := fed.Load()
	if err != nil {
		t.Fatal(err)
	}
	hubNode := st.NodesOf(layout.HubCluster)
	if len(hubNode) != 1 {
		t.Fatalf("the hub cluster has nodes %+v, want one (localfed up --hub-node)", hubNode)
	}
	socket := hubNode[0].Socket

	sw := newStopwatch(t)
	t.Log("helm install dbfleet-hub (2 replicas, leader election, image from the node)")
	helm(t, "install", "dbfleet-hub", chart("dbfleet-hub"), "--kubeconfig", fed.Kubeconfig(layout.HubCluster),
		"--set", "image.repository="+images.HubRepository, "--set", "image.tag="+localTag, "--set", "image.pullPolicy=Never")
	awaitHubRollout(t, hub, images.HubRepository+":"+localTag)
	leader := awaitLeader(t, hub, "")
	sw.lap("hub installed: 2 replicas Ready, " + leader + " leads")

	for _, m := range members {
		values := filepath.Join(work, m.Name+"-values.yaml")
		out, err := exec.Command(filepath.Join(bin, "hub"), "join", m.Name, "--region", m.Region, "--zone", m.Zone,
			"--kubeconfig", fed.Kubeconfig(layout.HubCluster), "--agent-image", images.AgentRepository+":"+localTag,
			"--output-format", "helm-values", "-o", values).CombinedOutput()
		if err != nil {
			t.Fatalf("hub join %s: %v\n%s", m.Name, err, out)
		}
		t.Logf("helm install dbfleet-agent into %s (values from hub join --output-format helm-values)", m.Name)
		helm(t, "install", "dbfleet-agent", chart("dbfleet-agent"), "--kubeconfig", fed.Kubeconfig(m.Name), "-f", values,
			// The nodes hold the image; postgres pods run the instance manager from it too.
			"--set", "image.pullPolicy=Never", "--set", "agent.instanceImage=self")
	}
	await(t, 3*time.Minute, "every agent pod Ready and every MemberCluster Ready", func(ctx context.Context) (bool, error) {
		for _, m := range members {
			d := &appsv1.Deployment{}
			if err := clusters[m.Name].Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: "dbfleet-agent"}, d); err != nil {
				return false, err
			}
			if d.Status.ReadyReplicas != 1 {
				return false, fmt.Errorf("%s: the agent's Deployment has %d Ready replicas", m.Name, d.Status.ReadyReplicas)
			}
			mc := &dbfleetv1alpha1.MemberCluster{}
			if err := hub.Get(ctx, client.ObjectKey{Name: m.Name}, mc); err != nil {
				return false, err
			}
			if !meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) {
				return false, fmt.Errorf("MemberCluster %s is not Ready", m.Name)
			}
		}
		return true, nil
	})
	sw.lap("agents installed as pods; every MemberCluster Ready")

	dbc := createDatabase(t, hub)
	await(t, 4*time.Minute, "the DatabaseCluster Available", func(ctx context.Context) (bool, error) {
		d := &dbfleetv1alpha1.DatabaseCluster{}
		if err := hub.Get(ctx, client.ObjectKeyFromObject(dbc), d); err != nil {
			return false, err
		}
		if d.Status.Primary == nil || d.Status.ReadyReplicas != d.Spec.Replicas ||
			!meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) {
			return false, fmt.Errorf("%d of %d replicas ready, primary %+v, conditions %+v", d.Status.ReadyReplicas, d.Spec.Replicas, d.Status.Primary, d.Status.Conditions)
		}
		return true, nil
	})
	base := observe(t, hub, clusters)
	if len(base.shares) != len(members) {
		t.Fatalf("shares %v, want one in each member", base.shares)
	}
	sw.lap(fmt.Sprintf("database Available: primary %s/%s at epoch %d; shares %v", base.primary.Cluster, base.primary.Pod, base.primary.Epoch, base.shares))

	t.Run("LeaderKilled", func(t *testing.T) {
		mon := watchDatabase(t, hub, clusters, base)
		pod := hubPod(t, hub, leader)
		id := containerID(t, pod)
		restarts := pod.Status.ContainerStatuses[0].RestartCount
		// The kubelet would restart the killed container at once, and a restarted hub competes
		// for the expired Lease on equal terms with the standby (the first run of this test saw
		// it win): with the node's kubelet stopped the killed replica stays down, as on a node
		// that crashed with it, until the other one has taken over. The running containers do
		// not depend on the kubelet.
		kubelet := layout.Kubelet(hubNode[0].Name)
		localfedOrFail(t, "stop", kubelet)
		sw := newStopwatch(t)
		if out, err := ctr(socket, "tasks", "kill", "--signal", "SIGKILL", id); err != nil {
			t.Fatalf("kill the leader's container: %v\n%s", err, out)
		}
		t.Logf("killed the leader %s (container %.12s) with SIGKILL through its node's containerd, its kubelet stopped", leader, id)
		next := awaitLeader(t, hub, leader)
		sw.lap("the other replica " + next + " holds the Lease")
		awaitReconciled(t, hub, next)
		sw.lap("the new leader reconciled the DatabaseCluster")
		localfedOrFail(t, "start", kubelet)
		// The kubelet restarts the killed container; the upgrade starts from two Ready replicas.
		await(t, 2*time.Minute, "the killed container restarted in "+leader+" and Ready", func(ctx context.Context) (bool, error) {
			p := hubPod(t, hub, leader)
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount <= restarts || !podReady(p) {
				return false, fmt.Errorf("%s: container statuses %+v, ready %t", leader, p.Status.ContainerStatuses, podReady(p))
			}
			return true, nil
		})
		awaitHubRollout(t, hub, images.HubRepository+":"+localTag)
		sw.lap("the killed replica restarted and Ready")
		if now := awaitLeader(t, hub, ""); now != next {
			t.Errorf("%s leads after the restart, want %s still", now, next)
		}
		mon.stop(t)
		requireSame(t, base, observe(t, hub, clusters))
		leader = next
	})
	if t.Failed() {
		return
	}

	t.Run("Upgrade", func(t *testing.T) {
		ref := images.HubRepository + ":" + upgradeTag
		archive := buildUpgradeImage(t)
		if out, err := ctr(socket, "images", "import", archive); err != nil {
			t.Fatalf("import %s: %v\n%s", archive, err, out)
		}
		oldIDs := imageIDs(t, hub)
		mon := watchDatabase(t, hub, clusters, base)
		sw := newStopwatch(t)
		t.Logf("helm upgrade dbfleet-hub --reuse-values --set image.tag=%s", upgradeTag)
		helm(t, "upgrade", "dbfleet-hub", chart("dbfleet-hub"), "--kubeconfig", fed.Kubeconfig(layout.HubCluster),
			"--reuse-values", "--set", "image.tag="+upgradeTag)
		awaitHubRollout(t, hub, ref)
		sw.lap("rolled out: 2 replicas of " + ref + " Ready, the old pods gone")
		newIDs := imageIDs(t, hub)
		for pod, id := range newIDs {
			if slices.Contains(oldIDsValues(oldIDs), id) {
				t.Errorf("pod %s runs image %s, the old pods' image", pod, id)
			}
		}
		t.Logf("image IDs: before %v, after %v", oldIDs, newIDs)
		next := awaitLeader(t, hub, "")
		if _, old := oldIDs[next]; old {
			t.Fatalf("%s leads, an old pod", next)
		}
		awaitReconciled(t, hub, next)
		sw.lap("a new pod " + next + " leads and reconciled the DatabaseCluster")
		mon.stop(t)
		requireSame(t, base, observe(t, hub, clusters))
	})
}

// localfedOrFail runs `localfed cmd component` (stop or start, by pid file).
func localfedOrFail(t *testing.T, cmd, component string) {
	t.Helper()
	var out bytes.Buffer
	if err := localfed(&out, cmd, component); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("localfed %s %s", cmd, component)
}

func chart(name string) string { return filepath.Join(framework.ChartsDir(), name) }

func helm(t *testing.T, args ...string) {
	t.Helper()
	if _, err := framework.RunHelm(args...); err != nil {
		t.Fatal(err)
	}
}

func newClient(t *testing.T, cluster string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", fed.Kubeconfig(cluster))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = 100, 200, 15*time.Second
	c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ctr runs containerd's client against the hub node's containerd, in the CRI's namespace.
func ctr(socket string, args ...string) ([]byte, error) {
	return exec.Command("ctr", append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

// await polls cond until it holds, failing the test after timeout with the last error; every
// 15 s it logs what it still waits for (a long step shows progress).
func await(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	start, last := time.Now(), time.Now()
	err := framework.WaitFor(context.Background(), timeout, what, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if !ok && time.Since(last) > 15*time.Second {
			last = time.Now()
			t.Logf("still waiting for %s (%s): %v", what, time.Since(start).Round(time.Second), err)
		}
		return ok, err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stopwatch logs each step's time since the previous one and since the start.
type stopwatch struct {
	t           *testing.T
	start, last time.Time
}

func newStopwatch(t *testing.T) *stopwatch {
	now := time.Now()
	return &stopwatch{t: t, start: now, last: now}
}

func (s *stopwatch) lap(what string) {
	s.t.Helper()
	now := time.Now()
	s.t.Logf("FIGURE %s: %s (%s since the start)", what, now.Sub(s.last).Round(100*time.Millisecond), now.Sub(s.start).Round(100*time.Millisecond))
	s.last = now
}

// hubPods are the hub's pods, by name.
func hubPods(ctx context.Context, hub client.Client) (map[string]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := hub.List(ctx, list, client.InNamespace(systemNamespace), client.MatchingLabels{"app.kubernetes.io/name": hubName}); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

func hubPod(t *testing.T, hub client.Client, name string) *corev1.Pod {
	t.Helper()
	pods, err := hubPods(context.Background(), hub)
	if err != nil {
		t.Fatal(err)
	}
	if pods[name] == nil {
		t.Fatalf("no hub pod %s", name)
	}
	return pods[name]
}

func containerID(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	for _, cs := range pod.Status.ContainerStatuses {
		if _, id, ok := strings.Cut(cs.ContainerID, "containerd://"); ok && cs.State.Running != nil {
			return id
		}
	}
	t.Fatalf("pod %s has no running container: %+v", pod.Name, pod.Status.ContainerStatuses)
	return ""
}

// awaitHubRollout waits until the hub's Deployment has rolled out: exactly two pods, both of
// image, Ready, and the Deployment's status says so for its current generation.
func awaitHubRollout(t *testing.T, hub client.Client, image string) {
	t.Helper()
	await(t, 4*time.Minute, "two Ready hub pods of "+image, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: hubName}, d); err != nil {
			return false, err
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != 2 || s.ReadyReplicas != 2 || s.AvailableReplicas != 2 || s.Replicas != 2 {
			return false, fmt.Errorf("Deployment %s: generation %d observed %d, replicas %d, updated %d, ready %d, available %d",
				hubName, d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
		}
		pods, err := hubPods(ctx, hub)
		if err != nil {
			return false, err
		}
		if len(pods) != 2 {
			return false, fmt.Errorf("%d hub pods", len(pods))
		}
		for _, p := range pods {
			if p.DeletionTimestamp != nil || p.Spec.Containers[0].Image != image || !podReady(p) {
				return false, fmt.Errorf("pod %s: image %s, ready %t, deleting %t", p.Name, p.Spec.Containers[0].Image, podReady(p), p.DeletionTimestamp != nil)
			}
		}
		return true, nil
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// awaitLeader waits until the hub's leader-election Lease is held, by a running hub pod other
// than not, and returns that pod's name (controller-runtime's holder identity is
// <hostname>_<uuid>, and a pod's hostname is its name).
func awaitLeader(t *testing.T, hub client.Client, not string) string {
	t.Helper()
	var leader string
	await(t, 2*time.Minute, "a hub pod other than "+strconv.Quote(not)+" to hold the Lease "+hubName, func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: hubName}, lease); err != nil {
			return false, err
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			return false, fmt.Errorf("the Lease has no holder")
		}
		pod, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
		if pod == not {
			return false, fmt.Errorf("%s still holds the Lease", pod)
		}
		pods, err := hubPods(ctx, hub)
		if err != nil {
			return false, err
		}
		if p := pods[pod]; p == nil || p.DeletionTimestamp != nil {
			return false, fmt.Errorf("the Lease's holder %s is not a running hub pod", *lease.Spec.HolderIdentity)
		}
		leader = pod
		return true, nil
	})
	return leader
}

// awaitReconciled waits until the leading pod's databasecluster controller has reconciled at
// least once (its controller_runtime_reconcile_total, from the pod's metrics port): from then
// on, whatever the new leader would change about the database it has had the chance to.
func awaitReconciled(t *testing.T, hub client.Client, pod string) {
	t.Helper()
	await(t, 2*time.Minute, pod+" to reconcile the DatabaseCluster", func(ctx context.Context) (bool, error) {
		p := hubPod(t, hub, pod)
		if p.Status.PodIP == "" {
			return false, fmt.Errorf("%s has no pod IP", pod)
		}
		n, err := reconciles(ctx, "http://"+p.Status.PodIP+":8080/metrics", "databasecluster")
		if err != nil {
			return false, err
		}
		if n == 0 {
			return false, fmt.Errorf("%s has not reconciled a DatabaseCluster yet", pod)
		}
		return true, nil
	})
}

// reconciles sums controller_runtime_reconcile_total of controller at url.
func reconciles(ctx context.Context, url, controller string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "controller_runtime_reconcile_total{") || !strings.Contains(line, `controller="`+controller+`"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", url, line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// imageIDs are the hub pods' running images (the container runtime's image IDs), by pod.
func imageIDs(t *testing.T, hub client.Client) map[string]string {
	t.Helper()
	pods, err := hubPods(context.Background(), hub)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for name, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			out[name] = cs.ImageID
		}
	}
	return out
}

func oldIDsValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// buildUpgradeImage rebuilds the hub image as make images does, with another version label and
// under upgradeTag, into the suite's directory.
func buildUpgradeImage(t *testing.T) string {
	t.Helper()
	out := filepath.Join(work, "images-upgrade")
	start := time.Now()
	cmd := exec.Command("go", "run", "./hack/images", "--out", out, "--only", "hub", "--version", upgradeTag, "--tag", upgradeTag)
	cmd.Dir = framework.RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rebuild the hub image: %v\n%s", err, b)
	}
	t.Logf("FIGURE rebuilt the hub image as %s:%s in %s", images.HubRepository, upgradeTag, time.Since(start).Round(100*time.Millisecond))
	archive := filepath.Join(out, "hub.tar")
	if _, err := os.Stat(archive); err != nil {
		t.Fatal(err)
	}
	return archive
}

// createDatabase creates a policy dividing replicas evenly between the members and a 2-replica
// PostgreSQL 15 whose primary prefers the first member.
func createDatabase(t *testing.T, hub client.Client) *dbfleetv1alpha1.DatabaseCluster {
	t.Helper()
	ctx := context.Background()
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dbNamespace}}); err != nil {
		t.Fatal(err)
	}
	var weights []policyv1alpha1.StaticClusterWeight
	for _, m := range members {
		weights = append(weights, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m.Name}}, Weight: 1})
	}
	pp := &dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbNamespace, Name: "placement"},
		Spec: dbfleetv1alpha1.PropagationSpec{
			ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &policyv1alpha1.ClusterPreferences{StaticWeightList: weights},
			}},
		},
	}
	if err := hub.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	dbc := &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbNamespace, Name: dbName},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{
				Engine: dbfleetv1alpha1.EnginePostgres, Version: "15", // postgres:15, imported into the members' nodes
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
			},
			Replicas: int32(len(members)),
			Primary:  &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{members[0].Name}},
		},
	}
	if err := hub.Create(ctx, dbc); err != nil {
		t.Fatal(err)
	}
	return dbc
}

// state is what must not change while the hub fails over or is upgraded.
type state struct {
	primary dbfleetv1alpha1.PrimaryStatus
	// shares are the MemberDatabases by cluster: their generation and epoch (the hub wrote
	// nothing new to them).
	shares map[string]share
	// statefulSets are the members' StatefulSets' generations by cluster/name (no agent
	// changed them).
	statefulSets map[string]int64
	// primaries are the instances reporting role primary, as cluster/pod.
	primaries []string
}

type share struct{ Generation, Epoch int64 }

func observeState(ctx context.Context, hub client.Client, clusters map[string]client.Client) (state, error) {
	s := state{shares: map[string]share{}, statefulSets: map[string]int64{}}
	d := &dbfleetv1alpha1.DatabaseCluster{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: dbNamespace, Name: dbName}, d); err != nil {
		return s, err
	}
	if d.Status.Primary != nil {
		s.primary = *d.Status.Primary
	}
	for _, m := range members {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(m.Name), Name: dbfleetv1alpha1.MemberDatabaseName(dbNamespace, dbName)}
		if err := hub.Get(ctx, key, mdb); client.IgnoreNotFound(err) != nil {
			return s, err
		} else if err == nil {
			s.shares[m.Name] = share{Generation: mdb.Generation, Epoch: mdb.Spec.Epoch}
			for _, in := range mdb.Status.Instances {
				if in.Role == dbfleetv1alpha1.InstanceRunningPrimary {
					s.primaries = append(s.primaries, m.Name+"/"+in.Pod)
				}
			}
		}
		list := &appsv1.StatefulSetList{}
		if err := clusters[m.Name].List(ctx, list); err != nil {
			return s, err
		}
		for _, sts := range list.Items {
			s.statefulSets[m.Name+"/"+sts.Namespace+"/"+sts.Name] = sts.Generation
		}
	}
	slices.Sort(s.primaries)
	return s, nil
}

func observe(t *testing.T, hub client.Client, clusters map[string]client.Client) state {
	t.Helper()
	s, err := observeState(context.Background(), hub, clusters)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.primaries) != 1 {
		t.Fatalf("primary instances %v, want exactly one", s.primaries)
	}
	return s
}

// differences lists how got differs from base.
func differences(base, got state) []string {
	var out []string
	if p, b := got.primary, base.primary; p.Cluster != b.Cluster || p.Pod != b.Pod || p.Epoch != b.Epoch || !p.Since.Equal(b.Since) {
		out = append(out, fmt.Sprintf("status.primary %+v, was %+v", got.primary, base.primary))
	}
	for c, sh := range base.shares {
		if got.shares[c] != sh {
			out = append(out, fmt.Sprintf("MemberDatabase of %s: generation/epoch %+v, was %+v", c, got.shares[c], sh))
		}
	}
	for c := range got.shares {
		if _, ok := base.shares[c]; !ok {
			out = append(out, "a new MemberDatabase in "+c)
		}
	}
	for k, g := range base.statefulSets {
		if got.statefulSets[k] != g {
			out = append(out, fmt.Sprintf("StatefulSet %s: generation %d, was %d", k, got.statefulSets[k], g))
		}
	}
	if len(got.primaries) > 1 {
		out = append(out, fmt.Sprintf("%d primaries: %v", len(got.primaries), got.primaries))
	}
	return out
}

func requireSame(t *testing.T, base, got state) {
	t.Helper()
	if d := differences(base, got); len(d) > 0 {
		t.Fatalf("the database changed: %s", strings.Join(d, "; "))
	}
	if !slices.Equal(got.primaries, base.primaries) {
		t.Fatalf("primary instances %v, were %v", got.primaries, base.primaries)
	}
	t.Logf("unchanged: primary %s/%s at epoch %d, MemberDatabases %v, StatefulSets %v, primary instance %v",
		got.primary.Cluster, got.primary.Pod, got.primary.Epoch, got.shares, got.statefulSets, got.primaries)
}

// monitor looks at the database every 200 ms while the hub changes hands, and keeps every
// difference from the baseline it sees (a change undone before the end would escape a look at
// the end only).
type monitor struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	seen   []string
	looks  int
}

func watchDatabase(t *testing.T, hub client.Client, clusters map[string]client.Client, base state) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{cancel: cancel}
	m.wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if s, err := observeState(ctx, hub, clusters); err == nil {
				m.mu.Lock()
				m.looks++
				for _, d := range differences(base, s) {
					if !slices.Contains(m.seen, d) {
						m.seen = append(m.seen, d)
					}
				}
				m.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(m.cancel)
	return m
}

func (m *monitor) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	m.wg.Wait()
	if len(m.seen) > 0 {
		t.Fatalf("in %d looks at the database, seen: %s", m.looks, strings.Join(m.seen, "; "))
	}
	t.Logf("%d looks at the database while the hub changed hands: nothing changed", m.looks)
}
