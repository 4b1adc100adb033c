package crds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dbfleet/dbfleet/pkg/plan"
	"github.com/dbfleet/dbfleet/test/framework"
)

const (
	agreeDatabase = `apiVersion: dbfleet.io/v1alpha1
kind: DatabaseCluster
metadata: {name: orders, namespace: NS}
spec: {engine: postgres, version: "16", replicas: 3, storage: {size: 1Gi}}
`
	agreePolicy = `apiVersion: dbfleet.io/v1alpha1
kind: PropagationPolicy
metadata: {name: production, namespace: NS}
spec:
  resourceSelectors: [{name: orders}]
  placement: {}
`
	agreeClusterPolicy = `apiVersion: dbfleet.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: agree-NS}
spec:
  resourceSelectors: [{namespace: NS}]
  placement: {}
`
	agreeMember = `apiVersion: dbfleet.io/v1alpha1
kind: MemberCluster
metadata: {name: agree-NS}
spec: {region: us-east}
`
)

// TestPlanAgreesWithTheAPIServer applies a table of objects, most of them bad, both to `hub plan`'s
// loader and to a real API server (strict field validation; status through the status
// subresource, as the hub writes it), and checks that both accept or both refuse, and that plan
// names every field the API server names.
func TestPlanAgreesWithTheAPIServer(t *testing.T) {
	r := strings.Replace
	for i, tc := range []struct {
		name string
		docs string
	}{
		{"valid DatabaseCluster", agreeDatabase},
		{"valid PropagationPolicy", agreePolicy},
		{"valid ClusterPropagationPolicy", agreeClusterPolicy},
		{"valid MemberCluster", agreeMember},
		{"valid status", agreeDatabase + "status: {primary: {cluster: east, epoch: 7}, placements: [{cluster: east, replicas: 3, ordinals: {start: 0, count: 3}, role: primary}]}\n"},
		{"empty name", r(agreeDatabase, "name: orders", `name: ""`, 1)},
		{"name not a DNS name", r(agreeDatabase, "name: orders", "name: Orders_1", 1)},
		{"name too long for a StatefulSet", r(agreeDatabase, "name: orders", "name: "+strings.Repeat("a", 53), 1)},
		{"member name too long", r(agreeMember, "name: agree-NS", "name: agree-NS-"+strings.Repeat("a", 50), 1)},
		{"engine oracle", r(agreeDatabase, "engine: postgres", "engine: oracle", 1)},
		{"engine mysql", r(agreeDatabase, "engine: postgres", "engine: mysql", 1)},
		{"custom engine without image", r(agreeDatabase, "engine: postgres", "engine: custom", 1)},
		{"empty version", r(agreeDatabase, `version: "16"`, `version: ""`, 1)},
		{"negative size", r(agreeDatabase, "size: 1Gi", "size: -1Gi", 1)},
		{"size not a quantity", r(agreeDatabase, "size: 1Gi", "size: lots", 1)},
		{"replicas at int32 max", r(agreeDatabase, "replicas: 3", "replicas: 2147483647", 1)},
		{"replicas zero", r(agreeDatabase, "replicas: 3", "replicas: 0", 1)},
		{"unknown field", r(agreeDatabase, "replicas: 3", "replicas: 3, replicaz: 3", 1)},
		{"negative epoch in status", agreeDatabase + "status: {primary: {cluster: east, epoch: -1}}\n"},
		{"negative ordinal in status", agreeDatabase + "status: {placements: [{cluster: east, replicas: 3, ordinals: {start: -3, count: 3}}]}\n"},
		{"duplicate object", agreeDatabase + "---\n" + r(agreeDatabase, "replicas: 3", "replicas: 5", 1)},
		{"selector operator unknown", r(agreePolicy, "{name: orders}", "{labelSelector: {matchExpressions: [{key: tier, operator: Equals, values: [a]}]}}", 1)},
		{"selector In without values", r(agreePolicy, "{name: orders}", "{labelSelector: {matchExpressions: [{key: tier, operator: In}]}}", 1)},
		{"selector bad label key", r(agreePolicy, "{name: orders}", "{labelSelector: {matchLabels: {'a/b/c': x}}}", 1)},
		{"selector name and labels", r(agreePolicy, "{name: orders}", "{name: orders, labelSelector: {matchLabels: {tier: a}}}", 1)},
		{"selector name invalid", r(agreePolicy, "{name: orders}", "{name: Orders}", 1)},
		{"selector namespace in a PropagationPolicy", r(agreePolicy, "{name: orders}", "{namespace: NS, name: orders}", 1)},
		{"selector namespace invalid", r(agreeClusterPolicy, "{namespace: NS}", "{namespace: Shop}", 1)},
		{"no selectors", r(agreePolicy, "[{name: orders}]", "[]", 1)},
		{"spread by label", r(agreePolicy, "placement: {}", "placement: {spreadConstraints: [{spreadByLabel: rack}]}", 1)},
		{"grace period without graceful purge", r(agreePolicy, "placement: {}", "placement: {}\n  failover: {application: {purgeMode: Never, gracePeriodSeconds: 60}}", 1)},
		{"push member without kubeconfig", r(agreeMember, "region: us-east", "syncMode: Push", 1)},
		{"member taint PreferNoSchedule", r(agreeMember, "region: us-east", "taints: [{key: a, effect: PreferNoSchedule}]", 1)},
		{"namespace on a cluster-scoped kind", r(agreeMember, "name: agree-NS}", "name: agree-NS, namespace: NS}", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := fmt.Sprintf("agree-%d", i)
			ensureNamespace(ctx, t, ns)
			docs := strings.ReplaceAll(tc.docs, "NS", ns)

			path := filepath.Join(t.TempDir(), "fleet.yaml")
			if err := os.WriteFile(path, []byte(docs), 0o600); err != nil {
				t.Fatal(err)
			}
			_, planErr := plan.LoadFiles(ctx, []string{path})

			objs, err := framework.DecodeObjects([]byte(docs))
			if err != nil {
				t.Fatal(err)
			}
			var apiErrs []error
			for _, obj := range objs {
				if err := apply(ctx, t, obj); err != nil {
					apiErrs = append(apiErrs, err)
				}
			}
			apiErr := errors.Join(apiErrs...)

			switch {
			case planErr == nil && apiErr == nil:
			case planErr != nil && apiErr != nil:
				for _, f := range causeFields(apiErr) {
					if !strings.Contains(planErr.Error(), f+":") {
						t.Errorf("the API server names %s, plan does not:\nAPI server: %v\nplan: %v", f, apiErr, planErr)
					}
				}
			case planErr != nil:
				t.Errorf("plan refuses what the API server accepts:\n%v", planErr)
			default:
				t.Errorf("plan accepts what the API server refuses:\n%v", apiErr)
			}
		})
	}
}

// apply creates obj as a user would (strict field validation), then writes its status, if it has
// one, through the status subresource as the hub does. The object is deleted when the test ends.
func apply(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) error {
	t.Helper()
	status, hasStatus := obj.Object["status"]
	if err := hub.Client.Create(ctx, obj, strict); err != nil {
		return err
	}
	t.Cleanup(func() {
		if err := hub.Client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	})
	if !hasStatus {
		return nil
	}
	obj.Object["status"] = status
	return hub.Client.Status().Update(ctx, obj)
}

// causeFields lists the fields an API server error names in its causes.
func causeFields(err error) []string {
	var fields []string
	for _, e := range unwrapAll(err) {
		var status apierrors.APIStatus
		if !errors.As(e, &status) || status.Status().Details == nil {
			continue
		}
		for _, c := range status.Status().Details.Causes {
			if c.Field != "" && c.Field != "<nil>" {
				fields = append(fields, c.Field)
			}
		}
	}
	return fields
}

func unwrapAll(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
