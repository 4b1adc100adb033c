package push

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	"sigs.k8s.io/multicluster-runtime/providers/kubeconfig"

	"github.com/dbfleet/dbfleet/pkg/agent/member"
	"github.com/dbfleet/dbfleet/pkg/hub"
)

// Name is the controller's name in the hub's --controllers list.
const Name = "push"

// The kubeconfig Secret of a Push cluster, as the provider reads it: in the hub's namespace
// (hub.Namespace), named SecretName(cluster), labelled SecretLabel=true, the kubeconfig under
// SecretKey. `hub join --sync-mode Push` writes it with these names.
const (
	// SecretLabel marks the Secrets the provider engages (value "true").
	SecretLabel = "dbfleet.io/kubeconfig"
	// SecretKey is the Secret's data key holding the kubeconfig.
	SecretKey = "kubeconfig"
)

// SecretName names a Push cluster's kubeconfig Secret: the cluster's own name, because the
// provider engages each cluster under the name of its Secret.
func SecretName(cluster string) string { return cluster }

// NewProvider returns the provider that engages Push clusters from their kubeconfig Secrets.
func NewProvider() *kubeconfig.Provider {
	return kubeconfig.New(kubeconfig.Options{Namespace: hub.Namespace, KubeconfigSecretLabel: SecretLabel, KubeconfigSecretKey: SecretKey,
		ClusterOptions: []cluster.Option{member.MemberCache}})
}

// The hub reads only the kubeconfig Secrets of its own namespace, and writes MemberDatabase status
// and finalizers as an agent would.
// +kubebuilder:rbac:groups="",namespace=dbfleet-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=dbfleet.io,resources=memberdatabases/status,verbs=get;update;patch

// Setup watches the kubeconfig Secrets and runs the member reconciler for the clusters they engage.
func Setup(ctx context.Context, mgr mcmanager.Manager, provider *kubeconfig.Provider) error {
	if err := provider.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("kubeconfig provider: %w", err)
	}
	// The hub is itself the authority for Push members: nothing there fences on a hub lease.
	return member.Setup(mgr, nil, controller.TypedOptions[mcreconcile.Request]{}, member.Settings{})
}
