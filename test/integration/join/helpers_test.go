package join

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/cmd/hub/app"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

// hubCommand runs the hub binary's command line in-process, as a user would run it.
func hubCommand(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := app.NewHubCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// joined is what `hub join` printed for a Pull cluster.
type joined struct {
	name          string
	manifests     []*unstructured.Unstructured
	hubKubeconfig []byte
	report        string // what join said it did (stderr)
}

// joinCluster runs `hub join NAME` with the test's admin kubeconfig and the given extra flags,
// and takes the agent's hub kubeconfig out of the printed manifests.
func joinCluster(t *testing.T, name string, extra ...string) *joined {
	t.Helper()
	args := append([]string{"join", name, "--kubeconfig", adminKubeconfig, "--region", "r1", "--zone", "r1-a"}, extra...)
	stdout, stderr, err := hubCommand(t, args...)
	if err != nil {
		t.Fatalf("hub join %s: %v\n%s", name, err, stderr)
	}
	objs, err := framework.DecodeObjects([]byte(stdout))
	if err != nil {
		t.Fatalf("join printed manifests that do not decode: %v\n%s", err, stdout)
	}
	j := &joined{name: name, manifests: objs, report: stderr}
	secret := j.find(t, "Secret", join.HubKubeconfigSecret)
	encoded, _, _ := unstructured.NestedString(secret.Object, "data", join.KubeconfigKey)
	if j.hubKubeconfig, err = base64.StdEncoding.DecodeString(encoded); err != nil || len(j.hubKubeconfig) == 0 {
		t.Fatalf("Secret %s has no base64 kubeconfig (%v)", join.HubKubeconfigSecret, err)
	}
	return j
}

func (j *joined) find(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range j.manifests {
		if obj.GetKind() == kind && obj.GetName() == name {
			return obj
		}
	}
	t.Fatalf("the manifests of %s have no %s %s", j.name, kind, name)
	return nil
}

// clientFor builds a client from a kubeconfig, as the agent does.
func clientFor(t *testing.T, kubeconfig []byte) client.WithWatch {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// memberDatabase creates, as the hub would, a share of DatabaseCluster dbNamespace/dbName in the
// cluster's namespace.
func memberDatabase(t *testing.T, cluster, dbNamespace, dbName string) *dbfleetv1alpha1.MemberDatabase {
	t.Helper()
	mdb := &dbfleetv1alpha1.MemberDatabase{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: dbfleetv1alpha1.MemberNamespace(cluster),
			Name:      dbfleetv1alpha1.MemberDatabaseName(dbNamespace, dbName),
			Labels: map[string]string{
				dbfleetv1alpha1.LabelDatabase: dbName, dbfleetv1alpha1.LabelDatabaseNamespace: dbNamespace,
				dbfleetv1alpha1.LabelCluster: cluster,
			},
		},
		Spec: dbfleetv1alpha1.MemberDatabaseSpec{
			DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: dbNamespace, Name: dbName},
			Database: dbfleetv1alpha1.DatabaseTemplate{
				Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.4",
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
			},
			Replicas: 1,
			Role:     dbfleetv1alpha1.RolePrimary,
			Epoch:    1,
		},
	}
	if err := hub.Client.Create(context.Background(), mdb); err != nil {
		t.Fatal(err)
	}
	return mdb
}

func allowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("the agent credential should be able to %s: %v", what, err)
	}
}

func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("the agent credential should be forbidden to %s; got %v", what, err)
	}
}

// waitAuthn waits until the credential in c authenticates (want true) or is refused with 401
// (want false). Token checks go through the API server's ServiceAccount cache, so a revocation
// can take a moment to show.
func waitAuthn(t *testing.T, c client.Client, cluster string, want bool) {
	t.Helper()
	what := fmt.Sprintf("the token of %s to be refused (401)", cluster)
	if want {
		what = fmt.Sprintf("the token of %s to authenticate", cluster)
	}
	var last error
	err := framework.WaitFor(context.Background(), framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		last = c.Get(ctx, client.ObjectKey{Name: cluster}, &dbfleetv1alpha1.MemberCluster{})
		if want {
			return !apierrors.IsUnauthorized(last), nil
		}
		return apierrors.IsUnauthorized(last), nil
	})
	if err != nil {
		t.Fatalf("%v; last answer: %v", err, last)
	}
}
