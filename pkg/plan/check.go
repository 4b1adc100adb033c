package plan

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/crdvalidation"
)

// CheckStatus admits every planned DatabaseCluster, with the status the hub would write, as the
// API server would on a status update, and records what it would refuse in Result.Refused (an
// epoch that overflowed, say). Such a result is not schedulable: the hub could not record it.
func CheckStatus(ctx context.Context, results []Result) error {
	v, err := crdvalidation.BuiltIn()
	if err != nil {
		return fmt.Errorf("load the CRDs hub plan carries: %w", err)
	}
	for i := range results {
		r := &results[i]
		dbc := r.Database.DeepCopy()
		dbc.APIVersion, dbc.Kind = dbfleetv1alpha1.GroupVersion.String(), "DatabaseCluster"
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dbc)
		if err != nil {
			return fmt.Errorf("DatabaseCluster %s/%s: %w", dbc.Namespace, dbc.Name, err)
		}
		r.Refused = v.Admit(ctx, &unstructured.Unstructured{Object: obj})
	}
	return nil
}
