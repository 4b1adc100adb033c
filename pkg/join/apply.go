package join

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Scheme knows the built-in kinds and dbfleet's; clients passed to Join and Unjoin need no more.
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(dbfleetv1alpha1.AddToScheme(s))
	return s
}

// toUnstructured turns a typed object into the document a user would write: apiVersion and kind
// set, no status, no null creationTimestamps (which typed objects always carry).
func toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, Scheme)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	delete(m, "status")
	if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
		delete(m, "spec")
	}
	dropNullTimestamps(m)
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

func dropNullTimestamps(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if k == "creationTimestamp" && child == nil {
				delete(v, k)
				continue
			}
			dropNullTimestamps(child)
		}
		// An emptied metadata (a pod template's) says nothing.
		if md, ok := v["metadata"].(map[string]any); ok && len(md) == 0 {
			delete(v, "metadata")
		}
	case []any:
		for _, child := range v {
			dropNullTimestamps(child)
		}
	}
}

// apply writes obj with server-side apply as join's field manager, taking over fields another
// manager set (join's word on its own objects is final). obj is updated with what the server
// returned.
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := toUnstructured(obj)
	if err != nil {
		return err
	}
	kind := u.GetKind()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", kind, describeKey(obj), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return fmt.Errorf("read back %s %s: %w", kind, describeKey(obj), err)
	}
	return nil
}

func describeKey(obj client.Object) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
