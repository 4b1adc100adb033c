// Package charts_test checks the Helm charts of this directory with a real helm (hack/helm.sh
// builds it from the Go module proxy): both lint, render at their defaults, and render the same
// objects as the other ways to install (kustomize deploy/hub; the manifests `hub join` prints).
package charts_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dbfleet/dbfleet/cmd/hub/app"
	"github.com/dbfleet/dbfleet/pkg/images"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("renders the charts with helm, which hack/helm.sh builds from the Go module proxy on first use (minutes)")
	}
}

func TestChartsLint(t *testing.T) {
	skipShort(t)
	for _, chart := range []string{"dbfleet-hub", "dbfleet-agent"} {
		if out, err := framework.RunHelm("lint", "--strict", filepath.Join(framework.ChartsDir(), chart)); err != nil {
			t.Errorf("helm lint %s: %v\n%s", chart, err, out)
		}
	}
}

// deployment is the one Deployment of objs.
func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	var found []*appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			d := &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
				t.Fatal(err)
			}
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("rendered %d Deployments, want 1", len(found))
	}
	return found[0]
}

// TestChartsRenderTheirImageAtDefaults: at their default values both charts render a Deployment
// running the image pkg/images names, which `hub join` and kustomize name too.
func TestChartsRenderTheirImageAtDefaults(t *testing.T) {
	skipShort(t)
	for chart, image := range map[string]string{"dbfleet-hub": images.Hub, "dbfleet-agent": images.Agent} {
		objs, err := framework.HelmTemplate(chart)
		if err != nil {
			t.Fatal(err)
		}
		if got := deployment(t, objs).Spec.Template.Spec.Containers[0].Image; got != image {
			t.Errorf("%s renders image %s at its defaults, want %s", chart, got, image)
		}
	}
}

// TestHubChartRendersWhatKustomizeDoes: at its defaults the hub chart renders exactly the objects
// of deploy/hub (kubectl kustomize): the same CRDs, RBAC rules and bindings, Deployment (image,
// args, security context, probes), Service, PodDisruptionBudget and flow control objects. The
// chart may add labels and annotations (Helm's own, resource-policy keep), not change them.
func TestHubChartRendersWhatKustomizeDoes(t *testing.T) {
	skipShort(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed to render deploy/hub: %v", err)
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(framework.RepoRoot(), "deploy", "hub")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/hub: %v", err)
	}
	want, err := framework.DecodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := framework.HelmTemplate("dbfleet-hub")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 20 {
		t.Fatalf("kustomize rendered %d objects, want the whole hub install", len(want))
	}
	for _, d := range framework.CompareObjects(want, got, nil) {
		t.Error(d)
	}
	for _, o := range got {
		if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
			if o.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s is not kept on helm uninstall (helm.sh/resource-policy: keep): deleting it deletes every object in it", framework.ObjectKey(o))
			}
		}
	}
}

// hubRunFlags maps every flag of `hub run` to the hub chart's value that sets it and the
// argument that value renders; an empty set means the flag is not for a pod, with the reason.
var hubRunFlags = map[string]struct{ set, arg string }{
	"kubeconfig":                     {"", ""}, // the pod reaches the hub cluster with its ServiceAccount
	"leader-election-namespace":      {"", "--leader-election-namespace=dbfleet-system"},
	"leader-elect":                   {"leaderElection.enabled=false", "--leader-elect=false"},
	"leader-election-id":             {"leaderElection.id=my-hub", "--leader-election-id=my-hub"},
	"leader-elect-lease-duration":    {"leaderElection.leaseDuration=31s", "--leader-elect-lease-duration=31s"},
	"leader-elect-renew-deadline":    {"leaderElection.renewDeadline=21s", "--leader-elect-renew-deadline=21s"},
	"leader-elect-retry-period":      {"leaderElection.retryPeriod=3s", "--leader-elect-retry-period=3s"},
	"metrics-bind-address":           {"metrics.port=9090", "--metrics-bind-address=:9090"},
	"health-probe-bind-address":      {"healthProbe.port=9091", "--health-probe-bind-address=:9091"},
	"pprof-bind-address":             {"hub.pprofBindAddress=127.0.0.1:6060", "--pprof-bind-address=127.0.0.1:6060"},
	"kube-api-qps":                   {"hub.kubeAPIQPS=1000.5", "--kube-api-qps=1000.5"},
	"kube-api-burst":                 {"hub.kubeAPIBurst=2000000", "--kube-api-burst=2000000"},
	"concurrent-reconciles":          {"hub.concurrentReconciles=32", "--concurrent-reconciles=32"},
	"cluster-grace-period":           {"hub.clusterGracePeriod=40s", "--cluster-grace-period=40s"},
	"heartbeat-status-interval":      {"hub.heartbeatStatusInterval=10m", "--heartbeat-status-interval=10m"},
	"default-unreachable-toleration": {"hub.defaultUnreachableToleration=30s", "--default-unreachable-toleration=30s"},
	"eviction-rate":                  {"hub.evictionRate=0", "--eviction-rate=0"},
	"eviction-burst":                 {"hub.evictionBurst=7", "--eviction-burst=7"},
	"unhealthy-cluster-threshold":    {"hub.unhealthyClusterThreshold=0.8", "--unhealthy-cluster-threshold=0.8"},
	"controllers":                    {"hub.controllers={*,-push}", "--controllers=*,-push"},
	"graceful-shutdown-timeout":      {"hub.gracefulShutdownTimeout=50s", "--graceful-shutdown-timeout=50s"},
	"zap-devel":                      {"hub.log.development=true", "--zap-devel"},
	"zap-encoder":                    {"hub.log.encoder=console", "--zap-encoder=console"},
	"zap-log-level":                  {"hub.log.level=debug", "--zap-log-level=debug"},
	"zap-stacktrace-level":           {"hub.log.stacktraceLevel=panic", "--zap-stacktrace-level=panic"},
	"zap-time-encoding":              {"hub.log.timeEncoding=rfc3339", "--zap-time-encoding=rfc3339"},
}

// TestHubChartHasAValueForEveryRunFlag: every flag of `hub run` has a value in the hub chart (a
// new flag without one fails here), and setting each renders the argument `hub run` reads.
func TestHubChartHasAValueForEveryRunFlag(t *testing.T) {
	skipShort(t)
	run, _, err := app.NewHubCommand().Find([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	run.Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := hubRunFlags[f.Name]; !ok && f.Name != "help" {
			t.Errorf("hub run --%s has no value in deploy/charts/dbfleet-hub: add one (values.yaml, templates/deployment.yaml) and to hubRunFlags", f.Name)
		}
	})
	// Leader election off leaves out its other flags: check them with it on, then off.
	for _, leaderElect := range []bool{true, false} {
		var args []string
		var want []string
		for name, f := range hubRunFlags {
			if f.set == "" || name == "leader-elect" || (!leaderElect && strings.HasPrefix(f.set, "leaderElection.")) {
				continue
			}
			args = append(args, "--set", f.set)
			want = append(want, f.arg)
		}
		if !leaderElect {
			args = append(args, "--set", hubRunFlags["leader-elect"].set)
			want = append(want, hubRunFlags["leader-elect"].arg)
		}
		objs, err := framework.HelmTemplate("dbfleet-hub", args...)
		if err != nil {
			t.Fatal(err)
		}
		c := deployment(t, objs).Spec.Template.Spec.Containers[0]
		for _, a := range want {
			if !slices.Contains(c.Args, a) {
				t.Errorf("with leader election %v, the hub chart's args %q lack %s", leaderElect, c.Args, a)
			}
		}
		if !leaderElect && slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect-") || a == "--leader-elect" }) {
			t.Errorf("leader election off, the args %q still configure it", c.Args)
		}
		if c.Ports[0].ContainerPort != 9090 || c.Ports[1].ContainerPort != 9091 {
			t.Errorf("ports %+v, want metrics 9090 and probes 9091 as the values say", c.Ports)
		}
	}
}

// sameKubeconfig compares the kubeconfigs of two Secrets by what they say (the chart and join
// serialise them differently), then takes them out of both.
func sameKubeconfig(want, got map[string]any) []string {
	load := func(m map[string]any) (*clientcmdapi.Config, error) {
		enc, _, _ := unstructured.NestedString(m, "data", join.KubeconfigKey)
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, err
		}
		return clientcmd.Load(raw)
	}
	w, err := load(want)
	if err != nil {
		return []string{"want's kubeconfig: " + err.Error()}
	}
	g, err := load(got)
	if err != nil {
		return []string{"the chart's kubeconfig: " + err.Error()}
	}
	unstructured.RemoveNestedField(want, "data", join.KubeconfigKey)
	unstructured.RemoveNestedField(got, "data", join.KubeconfigKey)
	// LocationOfOrigin and empty extension maps are clientcmd's bookkeeping, not content.
	for _, c := range []*clientcmdapi.Config{w, g} {
		c.Extensions, c.Preferences = nil, clientcmdapi.Preferences{}
		for _, v := range c.Clusters {
			v.LocationOfOrigin, v.Extensions = "", nil
		}
		for _, v := range c.AuthInfos {
			v.LocationOfOrigin, v.Extensions = "", nil
		}
		for _, v := range c.Contexts {
			v.LocationOfOrigin, v.Extensions = "", nil
		}
	}
	wy, _ := clientcmd.Write(*w)
	gy, _ := clientcmd.Write(*g)
	if string(wy) != string(gy) {
		return []string{"the hub kubeconfig differs:\nwant:\n" + string(wy) + "got:\n" + string(gy)}
	}
	return nil
}

// TestAgentChartRendersWhatHubJoinPrints: the agent chart, given the values `hub join
// --output-format helm-values` prints (join.HelmValues), renders the objects of the manifests
// `hub join` prints for the same cluster, image, timings, hub endpoint and token: Namespace,
// the hub kubeconfig Secret (the same kubeconfig), ServiceAccount, ClusterRole (the same rules),
// ClusterRoleBinding and Deployment (image, args, security context, volume).
func TestAgentChartRendersWhatHubJoinPrints(t *testing.T) {
	skipShort(t)
	ca := "-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"
	for _, tc := range []struct {
		name string
		s    join.AgentSettings
		ep   join.HubEndpoint
	}{
		{"defaults", join.AgentSettings{Cluster: "east", Image: join.DefaultAgentImage, HeartbeatInterval: "5s", FenceAfter: "15s"},
			join.HubEndpoint{Server: "https://hub.example.com:6443", CAData: []byte(ca)}},
		{"registry with a port, tls server name", join.AgentSettings{Cluster: "west-2", Image: "registry.example.com:5000/team/dbfleet-agent:v1.2.3", HeartbeatInterval: "2s", FenceAfter: "9s"},
			join.HubEndpoint{Server: "https://10.0.0.1:6443", CAData: []byte(ca), TLSServerName: "hub.internal"}},
		{"digest, insecure", join.AgentSettings{Cluster: "lab", Image: "registry.example.com/dbfleet/agent@sha256:" + strings.Repeat("ab", 32), HeartbeatInterval: "5s", FenceAfter: "15s"},
			join.HubEndpoint{Server: "https://lab-hub:6443", Insecure: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := "tok-" + tc.s.Cluster
			kubeconfig, err := join.HubKubeconfig(tc.ep, tc.s.Cluster, token)
			if err != nil {
				t.Fatal(err)
			}
			manifests, err := join.RenderYAML("", join.MemberManifests(tc.s, kubeconfig))
			if err != nil {
				t.Fatal(err)
			}
			want, err := framework.DecodeObjects(manifests)
			if err != nil {
				t.Fatal(err)
			}
			values, err := join.RenderHelmValues("# test\n", join.HelmValues(tc.s, tc.ep, token))
			if err != nil {
				t.Fatal(err)
			}
			// helm -f splits its argument at commas, which test names have.
			dir, err := os.MkdirTemp("", "dbfleet-agent-values-*")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			file := filepath.Join(dir, "values.yaml")
			if err := os.WriteFile(file, values, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := framework.HelmTemplate("dbfleet-agent", "-f", file)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range framework.CompareObjects(want, got, map[string]func(w, g map[string]any) []string{"Secret": sameKubeconfig}) {
				t.Error(d)
			}
		})
	}
}
