package hub

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	hubpkg "github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/test/framework"
)

// renderHub renders deploy/hub the way a user installs it (kubectl apply -k).
func renderHub(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl is needed to render deploy/hub: %v", err)
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(framework.RepoRoot(), "deploy", "hub")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/hub: %v", err)
	}
	objs, err := framework.DecodeObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestDeployRendersAndRunsWithLeastPrivilege(t *testing.T) {
	ctx := context.Background()
	objs := renderHub(t)
	kinds := map[string]int{}
	for _, obj := range objs {
		kinds[obj.GetKind()]++
		if obj.GetKind() == "CustomResourceDefinition" {
			continue // envtest installed the same files
		}
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		if strings.HasPrefix(obj.GetKind(), "ValidatingAdmissionPolicy") {
			// The API server is shared: TestDatabaseClusterInAReservedNamespaceIsNotPlaced tests
			// the hub without its policy. (test/integration/crds tests the policy.)
			t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
		}
		if obj.GetKind() == "ClusterRole" || obj.GetKind() == "Role" {
			assertNoWildcards(t, obj)
		}
	}
	for kind, n := range map[string]int{"CustomResourceDefinition": 6, "Deployment": 1, "Service": 1, "ServiceAccount": 1,
		"ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 2, "RoleBinding": 2, "Namespace": 1,
		"FlowSchema": 2, "PriorityLevelConfiguration": 1, "PodDisruptionBudget": 1,
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1} {
		if kinds[kind] != n {
			t.Errorf("deploy/hub renders %d %s, want %d", kinds[kind], kind, n)
		}
	}

	// Run the hub as its ServiceAccount, with leader election as deployed: the RBAC is enough if a
	// DatabaseCluster gets scheduled and propagated.
	asHub := rest.CopyConfig(env.Config)
	asHub.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:dbfleet-system:dbfleet-hub"}
	startHubAs(t, asHub, ctrl.Options{
		LeaderElection: true, LeaderElectionNamespace: hubpkg.Namespace, LeaderElectionID: "dbfleet-hub",
		LeaderElectionReleaseOnCancel: true,
	})
	f := newFixture(t)
	a := f.member("a", "r1", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())
	f.database("orders", 2, map[string]string{"app": "orders"})
	f.waitMemberDatabases("orders", map[string]int32{a: 2})
	f.waitDatabase("orders", "propagated", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return len(d.Status.Placements) == 1 && d.Status.Primary != nil && d.Finalizers != nil
	})
}

func assertNoWildcards(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, role); err != nil {
		t.Fatal(err)
	}
	for _, rule := range role.Rules {
		for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs} {
			for _, v := range list {
				if v == "*" {
					t.Errorf("%s %s grants a wildcard: %+v", obj.GetKind(), obj.GetName(), rule)
				}
			}
		}
	}
}

// TestAgentLeaseRenewalsHaveTheirOwnPriorityLevel applies deploy/hub's flow control objects and
// asks the API server, through its API Priority and Fairness response headers, which priority
// level an agent's Lease renewal and an agent's MemberDatabase status write land in: the first
// must be dbfleet-heartbeat, so renewals never queue behind bulk writes, the second must not.
func TestAgentLeaseRenewalsHaveTheirOwnPriorityLevel(t *testing.T) {
	ctx := context.Background()
	var plUID string
	for _, obj := range renderHub(t) {
		switch obj.GetKind() {
		case "FlowSchema", "PriorityLevelConfiguration", "Namespace":
		default:
			continue
		}
		if err := env.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	pl := &flowcontrolv1.PriorityLevelConfiguration{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "dbfleet-heartbeat"}, pl); err != nil {
		t.Fatal(err)
	}
	plUID = string(pl.UID)

	ns := dbfleetv1alpha1.MemberNamespace("apf")
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dbfleetv1alpha1.AgentLeaseName}}
	if err := env.Client.Create(ctx, lease); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The agent as the API server sees it: a ServiceAccount of its member namespace. The
	// classification happens before authorization, so no RBAC is needed to read the headers.
	asAgent := rest.CopyConfig(env.Config)
	asAgent.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":dbfleet-agent",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	httpClient, err := rest.HTTPClientFor(asAgent)
	if err != nil {
		t.Fatal(err)
	}
	level := func(method, path string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(asAgent.Host, "/")+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")
	}
	if got := level(http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/"+dbfleetv1alpha1.AgentLeaseName); got != plUID {
		t.Errorf("an agent's Lease renewal lands in priority level %q, want dbfleet-heartbeat (%s)", got, plUID)
	}
	if got := level(http.MethodPatch, "/apis/dbfleet.io/v1alpha1/namespaces/"+ns+"/memberdatabases/x/status"); got == "" || got == plUID {
		t.Errorf("an agent's MemberDatabase status write lands in priority level %q, want another than dbfleet-heartbeat (%s)", got, plUID)
	}
}
