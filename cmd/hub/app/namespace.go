package app

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ensureNamespace makes sure the hub's namespace exists before leader election needs it: without
// it, leader election cannot create its Lease and retries for ever, and no controller runs. It
// creates the namespace when the hub's identity may (an admin running `hub run` against a bare
// hub); the deployed hub may not, and its install (deploy/hub) brings the namespace, so then it
// only checks, with a dry-run create of a Lease there (a right leader election needs anyway),
// and fails with the fix when the namespace is missing.
func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	switch {
	case err == nil:
		ctrl.LoggerFrom(ctx).Info("Created the hub's namespace", "namespace", name)
		return nil
	case apierrors.IsAlreadyExists(err):
		return nil
	case !apierrors.IsForbidden(err):
		return fmt.Errorf("create namespace %s on the hub: %w", name, err)
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: name, GenerateName: "dbfleet-hub-check-"}}
	if err := c.Create(ctx, lease, client.DryRunAll); apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %s does not exist on the hub and the hub's identity may not create it: "+
			"create it (kubectl create namespace %s, or install the hub with kubectl apply -k deploy/hub), "+
			"or name an existing one with --leader-election-namespace: %w", name, name, err)
	}
	// It exists, or the check was not allowed either: leader election reports what is wrong.
	return nil
}
