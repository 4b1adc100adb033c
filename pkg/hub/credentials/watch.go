package credentials

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// secretsSource follows every Secret of the hub by metadata alone, so that an edit, a deletion
// or a user's late Secret reaches the database it belongs to at once rather than at the next
// DatabaseCluster event. The manager's own cache holds only the hub namespace's Secrets (whole
// objects would be a lot of memory at 10,000 databases), so this is a cache of its own that keeps
// of each Secret only its name, namespace, UID, resourceVersion and labels: about 200 bytes, and
// never a password. The reconciler still reads the Secrets it needs from the API server.
func (r *Reconciler) secretsSource(mgr ctrl.Manager) (source.Source, error) {
	secrets, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: keepIdentity,
	})
	if err != nil {
		return nil, fmt.Errorf("make the Secrets metadata cache: %w", err)
	}
	if err := mgr.Add(secrets); err != nil {
		return nil, fmt.Errorf("add the Secrets metadata cache: %w", err)
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return source.Kind(secrets, obj, handler.TypedEnqueueRequestsFromMapFunc(r.secretOwner)), nil
}

// keepIdentity strips a Secret's metadata down to what secretOwner needs; annotations go too
// (kubectl's last-applied-configuration would hold the Secret's data).
func keepIdentity(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil // a tombstone, say: passed on as it is
	}
	m.ObjectMeta = metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, Labels: m.Labels}
	return m, nil
}

// secretOwner maps a Secret to the DatabaseCluster whose credentials it is: a copy in a member
// namespace names it in its labels; a source in the database's namespace by its name
// <db>-<kind>, when that DatabaseCluster exists.
func (r *Reconciler) secretOwner(ctx context.Context, s *metav1.PartialObjectMetadata) []reconcile.Request {
	l := s.GetLabels()
	if ns, name := l[dbfleetv1alpha1.LabelDatabaseNamespace], l[dbfleetv1alpha1.LabelDatabase]; ns != "" && name != "" && l[dbfleetv1alpha1.LabelCredentials] != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	}
	for _, kind := range append([]string{dbfleetv1alpha1.CredentialsCA}, dbfleetv1alpha1.CredentialKinds...) {
		db, ok := strings.CutSuffix(s.Name, dbfleetv1alpha1.CredentialsSecretName("", kind))
		if !ok || db == "" {
			continue
		}
		key := types.NamespacedName{Namespace: s.Namespace, Name: db}
		if err := r.Client.Get(ctx, key, &dbfleetv1alpha1.DatabaseCluster{}); err != nil {
			return nil // no such database (or not in the cache yet: its own event comes)
		}
		return []reconcile.Request{{NamespacedName: key}}
	}
	return nil
}

var _ toolscache.TransformFunc = keepIdentity
