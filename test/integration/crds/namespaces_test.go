package crds

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestHubAdmissionRefusesReservedNamespaces: with the admission policy the hub's install ships
// (deploy/hub/admission.yaml, which the chart renders too), the API server refuses a
// DatabaseCluster in exactly the namespaces api/v1alpha1.ReservedHubNamespace names, and says why;
// the hub's controllers, which place nothing there, and the policy's CEL agree.
func TestHubAdmissionRefusesReservedNamespaces(t *testing.T) {
	ctx := context.Background()
	policy, err := framework.ReadObjects(filepath.Join(framework.RepoRoot(), "deploy", "hub", "admission.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range policy {
		if err := hub.Client.Create(ctx, obj); err != nil {
			t.Fatalf("install %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		t.Cleanup(func() { _ = hub.Client.Delete(context.Background(), obj) })
	}
	// The API server loads a new policy asynchronously: wait until it refuses the first case.
	ensureNamespace(ctx, t, "kube-dbfleet-test")
	err = framework.WaitFor(ctx, framework.DefaultTimeout, "the policy in force", func(ctx context.Context) (bool, error) {
		err := hub.Client.Create(ctx, databaseIn(t, "kube-dbfleet-test"))
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, ns := range []string{"kube-system", "kube-public", "kube-dbfleet-test", "default", "dbfleet-system", "dbfleet-other",
		"member-east", "shop", "kubeflow", "defaults", "dbfleet", "members", "my-kube-system"} {
		t.Run(ns, func(t *testing.T) {
			ensureNamespace(ctx, t, ns)
			err := hub.Client.Create(ctx, databaseIn(t, ns))
			why := dbfleetv1alpha1.ReservedHubNamespace(ns)
			switch {
			case why == "" && err != nil:
				t.Errorf("refused in %s, which may hold a database: %v", ns, err)
			case why != "" && err == nil:
				t.Errorf("accepted in %s, which is reserved (%s)", ns, why)
			case why != "" && !strings.Contains(err.Error(), "namespace "+ns+" may hold no DatabaseCluster"):
				t.Errorf("refused in %s with %v, want the reason", ns, err)
			}
		})
	}
}

// databaseIn is a valid DatabaseCluster in namespace ns.
func databaseIn(t *testing.T, ns string) *unstructured.Unstructured {
	obj := object(t, "DatabaseCluster", uniqueName("ns"), dbcSpec)
	obj.SetNamespace(ns)
	return obj
}
