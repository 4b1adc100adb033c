package install

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/pkg/images"
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
