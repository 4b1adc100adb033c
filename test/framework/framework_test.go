package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestMemberEnvironment exercises what other suites lean on: a member API server, a kubeconfig
// for a separate user that a process could load, and the create/delete-and-wait helpers.
func TestMemberEnvironment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver")
	}
	member, err := StartMember("east")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := member.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()

	kubeconfig, err := member.Kubeconfig("admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "east.kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	userClient, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		t.Fatal(err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	if err := CreateAndWait(ctx, member.Client, userClient, ns); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "probe"}}
	if err := CreateAndWait(ctx, userClient, member.Client, cm); err != nil {
		t.Fatal(err)
	}
	if err := DeleteAndWait(ctx, member.Client, userClient, cm); err != nil {
		t.Fatal(err)
	}
	// The member has no CRDs: it is a plain control plane.
	err = member.Client.Get(ctx, client.ObjectKey{Name: "databaseclusters.dbfleet.io"}, &apiextensionsv1.CustomResourceDefinition{})
	if err == nil {
		t.Error("member API server has the dbfleet CRDs, want a plain control plane")
	}
}
