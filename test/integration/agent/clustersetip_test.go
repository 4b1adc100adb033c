package agent

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/specs"
	"github.com/dbfleet/dbfleet/test/framework"
)

// installServiceExportCRD gives the member the MCS API's ServiceExport (sigs.k8s.io/mcs-api's
// group, version and names; its schema left open, as this test only creates and deletes them),
// which a clusterset's MCS implementation would install.
func installServiceExportCRD(t *testing.T, env *framework.Environment) {
	t.Helper()
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "serviceexports.multicluster.x-k8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "multicluster.x-k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "serviceexports", Singular: "serviceexport", Kind: "ServiceExport", ListKind: "ServiceExportList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	if err := env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := framework.WaitFor(ctx, framework.DefaultTimeout, "ServiceExport CRD established", func(ctx context.Context) (bool, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// ClusterSetIP: the primary's share exports <db>-rw and <db>-ro and reports the clusterset
// names; when the share goes, its ServiceExports go with it.
func TestClusterSetIPExportsTheShareAndTheExportsGoWithIt(t *testing.T) {
	installServiceExportCRD(t, east)
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary, func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.Network = dbfleetv1alpha1.DatabaseNetworkClusterSetIP
	})
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.runInstancePod(sts, 0, newInstanceServer(t, `{"pod":"orders-0","role":"primary","epoch":1,"timeline":1,"ready":true}`))
	s.runInstancePod(sts, 1, newInstanceServer(t, `{"pod":"orders-1","role":"standby","epoch":1,"timeline":1,"streaming":true,"ready":true}`))

	got := s.waitMDB("ClusterSetIP endpoints", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return m.Status.Endpoints != nil && m.Status.Endpoints.ReadWrite != "" && len(m.Status.Endpoints.ReadOnly) == 1
	})
	if e := got.Status.Endpoints; e.ReadWrite != "orders-rw."+s.ns+".svc.clusterset.local:5432" || e.ReadOnly[0] != "orders-ro."+s.ns+".svc.clusterset.local:5432" {
		t.Errorf("endpoints %+v, want the clusterset names of orders-rw and orders-ro", e)
	}
	exports := []string{specs.ReadWriteServiceName(s.db), specs.ReadOnlyServiceName(s.db)}
	gvk := schema.GroupVersionKind{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Kind: "ServiceExport"}
	export := func(name string) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return east.Client.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, u)
	}
	for _, name := range exports {
		if err := export(name); err != nil {
			t.Errorf("ServiceExport %s: %v", name, err)
		}
	}

	if err := hub.Client.Delete(s.ctx, s.mdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, hub.Client, s.mdb)
	for _, name := range exports {
		if err := export(name); !apierrors.IsNotFound(err) {
			t.Errorf("ServiceExport %s outlived its share: %v", name, err)
		}
	}
}
