package join

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
)

// ErrClusterInUse is wrapped by Unjoin's error when the cluster still holds shares of databases.
var ErrClusterInUse = errors.New("cluster still runs databases")

// UnjoinResult is what Unjoin did.
type UnjoinResult struct {
	// Deleted lists the objects Unjoin deleted ("Kind name" or "Kind namespace/name").
	Deleted []string
	// AlreadyGone lists the objects that did not exist (a repeated unjoin).
	AlreadyGone []string
	// Abandoned lists the MemberDatabases --force removed without their agent's confirmation.
	Abandoned []string
	// NamespaceTerminating is true when member-<name> is still being deleted as Unjoin returns
	// (the namespace controller removes its contents first).
	NamespaceTerminating bool
}

// Unjoin removes a cluster from the hub and revokes its agent's credential. It refuses while
// MemberDatabases exist in member-<name> (the error wraps ErrClusterInUse and names their
// DatabaseClusters) unless force is set; force deletes those MemberDatabases and drops their agent
// finalizers, leaving whatever the member still runs behind.
//
// It deletes, in order: the agent's ServiceAccount (its tokens stop working at once, without
// waiting for the namespace controller) and cluster-wide RBAC; the MemberCluster, so that
// placement stops choosing the cluster; with force, the MemberDatabases; the namespace
// member-<name>; and the Push-mode kubeconfig Secret. Objects already gone are skipped, so
// Unjoin can be repeated.
func Unjoin(ctx context.Context, c client.Client, name string, force bool) (*UnjoinResult, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	ns := dbfleetv1alpha1.MemberNamespace(name)
	mdbs := &dbfleetv1alpha1.MemberDatabaseList{}
	if err := c.List(ctx, mdbs, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list MemberDatabases in %s: %w", ns, err)
	}
	if len(mdbs.Items) > 0 && !force {
		return nil, fmt.Errorf("%w: cluster %s holds shares of %d DatabaseCluster(s): %s; move them away first (taint the MemberCluster or change their policies) "+
			"and wait until namespace %s has no MemberDatabases, or unjoin with --force, which leaves whatever the member still runs behind",
			ErrClusterInUse, name, len(mdbs.Items), describeShares(mdbs.Items), ns)
	}
	u := &unjoin{c: c, name: name, ns: ns, res: &UnjoinResult{}}
	// Revoke first.
	if err := u.revoke(ctx); err != nil {
		return u.res, err
	}
	secretRef, err := u.deleteMemberCluster(ctx)
	if err != nil {
		return u.res, err
	}
	if force {
		for i := range mdbs.Items {
			if err := abandon(ctx, c, &mdbs.Items[i]); err != nil {
				return u.res, err
			}
			u.res.Abandoned = append(u.res.Abandoned, describeKey(&mdbs.Items[i]))
		}
	}
	if err := u.deleteNamespace(ctx); err != nil {
		return u.res, err
	}
	return u.res, u.deleteJoinSecret(ctx, secretRef)
}

// unjoin is one cluster's unjoin under way: what it deleted and found gone so far.
type unjoin struct {
	c        client.Client
	name, ns string
	res      *UnjoinResult
}

// delete deletes obj and records it as deleted, or as already gone.
func (u *unjoin) delete(ctx context.Context, obj client.Object, kind string) error {
	err := u.c.Delete(ctx, obj)
	switch {
	case apierrors.IsNotFound(err):
		u.res.AlreadyGone = append(u.res.AlreadyGone, kind+" "+describeKey(obj))
	case err != nil:
		return fmt.Errorf("delete %s %s: %w", kind, describeKey(obj), err)
	default:
		u.res.Deleted = append(u.res.Deleted, kind+" "+describeKey(obj))
	}
	return nil
}

// revoke deletes the agent's credentials: its ServiceAccount, and the cluster-wide grant of
// joins made before the MemberClusterReport.
func (u *unjoin) revoke(ctx context.Context) error {
	legacyBinding, legacyRole := legacyAgentGrant(u.name)
	for _, step := range []struct {
		obj  client.Object
		kind string
	}{
		{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: u.ns, Name: AgentName}}, "ServiceAccount"},
		{legacyBinding, "ClusterRoleBinding"},
		{legacyRole, "ClusterRole"},
	} {
		if err := u.delete(ctx, step.obj, step.kind); err != nil {
			return err
		}
	}
	return nil
}

// deleteMemberCluster deletes the MemberCluster and returns the Push kubeconfig Secret it named
// (join's name for it when it is gone).
func (u *unjoin) deleteMemberCluster(ctx context.Context) (*dbfleetv1alpha1.SecretReference, error) {
	secretRef := &dbfleetv1alpha1.SecretReference{Namespace: hub.Namespace, Name: push.SecretName(u.name)}
	mc := &dbfleetv1alpha1.MemberCluster{}
	switch err := u.c.Get(ctx, client.ObjectKey{Name: u.name}, mc); {
	case apierrors.IsNotFound(err):
		u.res.AlreadyGone = append(u.res.AlreadyGone, "MemberCluster "+u.name)
	case err != nil:
		return secretRef, fmt.Errorf("get MemberCluster %s: %w", u.name, err)
	default:
		if mc.Spec.KubeconfigSecretRef != nil {
			secretRef = mc.Spec.KubeconfigSecretRef
		}
		if err := u.delete(ctx, mc, "MemberCluster"); err != nil {
			return secretRef, err
		}
	}
	return secretRef, nil
}

// deleteNamespace deletes member-<cluster>. A namespace already terminating refuses a second
// delete (409), so it looks first.
func (u *unjoin) deleteNamespace(ctx context.Context) error {
	namespace := &corev1.Namespace{}
	switch err := u.c.Get(ctx, client.ObjectKey{Name: u.ns}, namespace); {
	case apierrors.IsNotFound(err):
		u.res.AlreadyGone = append(u.res.AlreadyGone, "Namespace "+u.ns)
	case err != nil:
		return fmt.Errorf("get namespace %s: %w", u.ns, err)
	case !namespace.DeletionTimestamp.IsZero():
		u.res.NamespaceTerminating = true
	default:
		if err := u.delete(ctx, namespace, "Namespace"); err != nil {
			return err
		}
		if err := u.c.Get(ctx, client.ObjectKey{Name: u.ns}, namespace); err == nil {
			u.res.NamespaceTerminating = true
		}
	}
	return nil
}

// deleteJoinSecret deletes the Push Secret, only if join made it for this cluster: a Secret the
// user named in the MemberCluster is theirs.
func (u *unjoin) deleteJoinSecret(ctx context.Context, ref *dbfleetv1alpha1.SecretReference) error {
	secret := &corev1.Secret{}
	switch err := u.c.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	case secret.Labels[dbfleetv1alpha1.LabelCluster] == u.name && secret.Labels[LabelManagedBy] == ManagedByJoin:
		return u.delete(ctx, secret, "Secret")
	}
	return nil
}

// abandon deletes a MemberDatabase and removes the agent's finalizer, which no agent will remove
// once its credential is gone. Other finalizers are kept.
func abandon(ctx context.Context, c client.Client, mdb *dbfleetv1alpha1.MemberDatabase) error {
	if err := c.Delete(ctx, mdb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete MemberDatabase %s: %w", describeKey(mdb), err)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &dbfleetv1alpha1.MemberDatabase{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(mdb), fresh); err != nil {
			return err
		}
		patched := fresh.DeepCopy()
		if !controllerutil.RemoveFinalizer(patched, dbfleetv1alpha1.MemberDatabaseFinalizer) {
			return nil
		}
		return c.Patch(ctx, patched, client.MergeFromWithOptions(fresh, client.MergeFromWithOptimisticLock{}))
	})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove the agent finalizer of MemberDatabase %s: %w", describeKey(mdb), err)
	}
	return nil
}

// describeShares names the DatabaseClusters behind MemberDatabases: "shop/orders, shop/users".
func describeShares(items []dbfleetv1alpha1.MemberDatabase) string {
	names := make([]string, 0, len(items))
	for i := range items {
		ref := items[i].Spec.DatabaseRef
		n := ref.Namespace + "/" + ref.Name
		if !items[i].DeletionTimestamp.IsZero() {
			n += " (being removed by the agent)"
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ", ")
}

// Summary describes what Unjoin did, for people.
func (r *UnjoinResult) Summary(name string) string {
	var b strings.Builder
	if len(r.Deleted) == 0 {
		fmt.Fprintf(&b, "cluster %s: nothing left to delete\n", name)
	}
	for _, d := range r.Deleted {
		fmt.Fprintf(&b, "deleted %s\n", d)
		if strings.HasPrefix(d, "ServiceAccount ") {
			fmt.Fprintf(&b, "  the agent's hub tokens stop working (within the API server's 10 s authentication cache)\n")
		}
	}
	for _, a := range r.Abandoned {
		fmt.Fprintf(&b, "forced: deleted MemberDatabase %s without the agent's confirmation; whatever it ran in cluster %s is left there\n", a, name)
	}
	if r.NamespaceTerminating {
		fmt.Fprintf(&b, "namespace %s is terminating: the namespace controller removes what is left in it, then the namespace\n", dbfleetv1alpha1.MemberNamespace(name))
	}
	return b.String()
}
