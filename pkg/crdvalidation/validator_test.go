package crdvalidation

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/dbfleet/dbfleet/deploy/crds"
)

// TestEmbeddedCRDsAreValid runs the API server's own CRD validation over the CRDs the binary
// carries, CEL compilation and cost estimates included, so a rule the API server would refuse
// (an unknown function, a list without bounds) fails here without an API server.
func TestEmbeddedCRDsAreValid(t *testing.T) {
	paths, err := fs.Glob(crds.Files, "*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no embedded CRDs (%v)", err)
	}
	for _, path := range paths {
		data, err := crds.Files.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var v1 apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &v1); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		internal := &apiextensions.CustomResourceDefinition{}
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, internal, nil); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, version := range internal.Spec.Versions { // as the API server's create sets them
			if version.Storage {
				internal.Status.StoredVersions = append(internal.Status.StoredVersions, version.Name)
			}
		}
		if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
			t.Errorf("%s: the API server would refuse it:\n%v", path, errs.ToAggregate())
		}
	}
	v, err := BuiltIn()
	if err != nil {
		t.Fatal(err)
	}
	want := "ClusterPropagationPolicy DatabaseCluster MemberCluster MemberClusterReport MemberDatabase PropagationPolicy"
	if got := strings.Join(v.Kinds(), " "); got != want {
		t.Errorf("kinds %s, want %s", got, want)
	}
}

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestAdmit: a valid object passes and gets the schema defaults; unknown fields are pruned and
// reported; errors carry field paths; CEL rules are skipped, as by the API server, once a blocking
// error is found, and run otherwise.
func TestAdmit(t *testing.T) {
	v, err := BuiltIn()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	pp := decode(t, `apiVersion: dbfleet.io/v1alpha1
kind: PropagationPolicy
metadata: {name: p, namespace: shop}
spec:
  resourceSelectors: [{name: orders}]
  placement: {}
  failover: {cluster: {}}
`)
	if errs := v.Admit(ctx, pp); len(errs) > 0 {
		t.Fatalf("valid policy refused: %v", errs)
	}
	if got, _, _ := unstructured.NestedString(pp.Object, "spec", "failover", "cluster", "purgeMode"); got != "Gracefully" {
		t.Errorf("purgeMode %q after admission, want the default Gracefully", got)
	}

	unknown := decode(t, `apiVersion: dbfleet.io/v1alpha1
kind: MemberCluster
metadata: {name: east}
spec: {region: us-east, color: blue}
`)
	errs := v.Admit(ctx, unknown)
	if len(errs) != 1 || errs[0].Field != "spec.color" || errs[0].Detail != "unknown field" {
		t.Errorf("errors %v, want spec.color reported as unknown", errs)
	}
	if _, found, _ := unstructured.NestedString(unknown.Object, "spec", "color"); found {
		t.Error("unknown field not pruned")
	}

	blocked := decode(t, `apiVersion: dbfleet.io/v1alpha1
kind: DatabaseCluster
metadata: {name: orders, namespace: shop}
spec: {engine: oracle, version: "16", replicas: 1, storage: {size: "0"}}
`)
	errs = v.Admit(ctx, blocked)
	if len(errs) != 2 || errs[0].Field != "spec.engine" || !strings.Contains(errs[1].Error(), "some validation rules were not checked") {
		t.Errorf("errors %v, want spec.engine and the note that CEL rules were skipped", errs)
	}

	celOnly := decode(t, `apiVersion: dbfleet.io/v1alpha1
kind: DatabaseCluster
metadata: {name: orders, namespace: shop}
spec: {engine: postgres, version: "16", replicas: 1, storage: {size: "0"}}
`)
	errs = v.Admit(ctx, celOnly)
	if len(errs) != 1 || errs[0].Field != "spec.storage.size" || !strings.Contains(errs[0].Detail, "size must be greater than zero") {
		t.Errorf("errors %v, want the CEL rule on spec.storage.size", errs)
	}

	wrongVersion := decode(t, "apiVersion: dbfleet.io/v1\nkind: MemberCluster\nmetadata: {name: east}\n")
	if errs := v.Admit(ctx, wrongVersion); len(errs) != 1 || errs[0].Field != "apiVersion" {
		t.Errorf("errors %v, want apiVersion refused", errs)
	}
}
