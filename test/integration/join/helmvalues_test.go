package join

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestJoinHelmValuesInstallTheAgent runs `hub join --output-format helm-values` as a user would,
// renders the dbfleet-agent chart with what it printed, and checks the result works: the values
// name the cluster, image and timings given, the chart's Secret holds a hub kubeconfig whose
// token acts as the cluster's agent on the hub (its own Lease), and a member API server accepts
// every object the chart renders.
func TestJoinHelmValuesInstallTheAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("renders the agent chart with helm, which hack/helm.sh builds on first use")
	}
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "dbfleet-join-values-*") // helm -f splits at commas; test dirs may have some
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "north-values.yaml")
	stdout, _, err := hubCommand(t, "join", "north", "--kubeconfig", adminKubeconfig, "--region", "eu-north-1", "--zone", "eu-north-1a",
		"--agent-image", "registry.example.com:5000/dbfleet/agent:v1", "--heartbeat-interval", "2s", "--fence-after", "9s",
		"--output-format", "helm-values", "-o", file)
	if err != nil {
		t.Fatalf("join: %v\n%s", err, stdout)
	}
	if !strings.Contains(stdout, "helm") || !strings.Contains(stdout, file) {
		t.Errorf("join does not say to install the chart with %s:\n%s", file, stdout)
	}
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("-o file mode %v, want 0600: it holds a credential", info.Mode().Perm())
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var values join.AgentChartValues
	if err := yaml.UnmarshalStrict(raw, &values); err != nil {
		t.Fatalf("the values do not decode: %v\n%s", err, raw)
	}
	if values.ClusterName != "north" || values.Image.Repository != "registry.example.com:5000/dbfleet/agent" || values.Image.Tag != "v1" ||
		values.HeartbeatInterval != "2s" || values.FenceAfter != "9s" || values.Hub.Token == "" || values.Hub.Server != strings.TrimSuffix(hub.Config.Host, "/") || !strings.Contains(values.Hub.CAData, "BEGIN CERTIFICATE") {
		t.Errorf("values: cluster %q, image %+v, timings %s/%s, server %q, token and CA given %v/%v; want north, the image and timings given, the hub's server %s, a token and its CA",
			values.ClusterName, values.Image, values.HeartbeatInterval, values.FenceAfter, values.Hub.Server, values.Hub.Token != "", values.Hub.CAData != "", hub.Config.Host)
	}

	objs, err := framework.HelmTemplate("dbfleet-agent", "-f", file)
	if err != nil {
		t.Fatal(err)
	}
	var kubeconfig []byte
	for _, o := range objs {
		if o.GetKind() == "Secret" && o.GetName() == join.HubKubeconfigSecret {
			enc, _, _ := unstructured.NestedString(o.Object, "data", join.KubeconfigKey)
			if kubeconfig, err = base64.StdEncoding.DecodeString(enc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(kubeconfig) == 0 {
		t.Fatalf("the chart rendered no Secret %s with a kubeconfig", join.HubKubeconfigSecret)
	}
	agent := clientFor(t, kubeconfig)
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace("north"), Name: dbfleetv1alpha1.AgentLeaseName},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("north"), LeaseDurationSeconds: ptr.To[int32](15)},
	}
	allowed(t, "create its Lease with the chart's kubeconfig", agent.Create(ctx, lease))
	forbidden(t, "list MemberClusters", agent.List(ctx, &dbfleetv1alpha1.MemberClusterList{}))

	member, err := framework.StartMember("north")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := member.Stop(); err != nil {
			t.Error(err)
		}
	})
	for _, obj := range objs {
		if err := member.Client.Create(ctx, obj); err != nil {
			t.Fatalf("apply %s to the member: %v", framework.ObjectKey(obj), err)
		}
	}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: join.SystemNamespace, Name: join.AgentName}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}); err != nil {
		t.Errorf("the agent's Deployment is not on the member: %v", err)
	}
}
