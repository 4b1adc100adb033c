package install

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/images"
	"github.com/dbfleet/dbfleet/test/framework"
)

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
