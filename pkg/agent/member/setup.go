package member

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mchandler "sigs.k8s.io/multicluster-runtime/pkg/handler"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/predicates"
	"github.com/dbfleet/dbfleet/pkg/queue"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// Settings are the agent's flags the reconciler acts on.
type Settings struct {
	// InstanceImage is --instance-image (Reconciler.InstanceImage).
	InstanceImage string
	// PrimaryLostAfter is --primary-lost-after (Reconciler.PrimaryLostAfter).
	PrimaryLostAfter time.Duration
}

// MemberCache scopes the cache of a member cluster (a cluster.Option): every kind the
// reconciler reads, but of Secrets only those the agent wrote (labelled managed-by
// dbfleet-agent), so that it holds no other Secret of the member in memory: a member's Helm
// releases and tokens can be many and large. Secrets it does not find there it looks up on the
// API server before writing (applyOwnedSecret), never over another's.
func MemberCache(o *cluster.Options) {
	if o.Cache.ByObject == nil {
		o.Cache.ByObject = map[client.Object]cache.ByObject{}
	}
	o.Cache.ByObject[&corev1.Secret{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{specs.LabelManagedBy: specs.ManagedByAgent})}
}

// Name is the controller's name.
const Name = "memberdatabase"

// Setup registers the member-side reconciler with a multicluster manager whose local cluster is
// the hub and whose provider engages member clusters.
// guard is the agent's hub-lease freshness, nil in the hub.
func Setup(mgr mcmanager.Manager, guard *fence.Guard, opts controller.TypedOptions[mcreconcile.Request], settings Settings) error {
	r := &Reconciler{Manager: mgr, Guard: guard, Recorder: mgr.GetLocalManager().GetEventRecorder("dbfleet-agent"),
		InstanceImage: settings.InstanceImage, PrimaryLostAfter: settings.PrimaryLostAfter}
	opts = withManagerDefaults(opts, mgr.GetControllerOptions())
	if opts.NewQueue == nil {
		opts.NewQueue = queue.New[mcreconcile.Request](mgr.GetLocalManager().GetLogger())
	}
	if guard != nil {
		// The agent's live primaries' Leases follow each hub renewal apart from the passes.
		if err := mgr.GetLocalManager().Add(renewer{r: r}); err != nil {
			return err
		}
	}
	return mcbuilder.ControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		// MemberDatabases live on the hub: route each to the member cluster it names. Not the
		// agent's own status reports: each would bring its share straight back (NotStatusOnly).
		Watches(&dbfleetv1alpha1.MemberDatabase{}, func(string, cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
			return mchandler.TypedEnqueueRequestsFromMapFuncWithClusterPreservation(memberDatabaseToCluster)
		}, mcbuilder.WithEngageWithLocalCluster(true), mcbuilder.WithEngageWithProviderClusters(false), mcbuilder.WithPredicates(predicates.NotStatusOnly())).
		// What the agent created in a member: a change (drift, status, a new pod) brings its
		// MemberDatabase back.
		Watches(&appsv1.StatefulSet{}, shareOf, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		Watches(&corev1.Pod{}, shareOf, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		// A LoadBalancer Service getting its address changes the share's endpoint.
		Watches(&corev1.Service{}, shareOf, mcbuilder.WithEngageWithLocalCluster(false), mcbuilder.WithEngageWithProviderClusters(true)).
		Complete(r)
}

// withManagerDefaults fills in what opts leave unset from the manager's controller options, as
// controller-runtime's builder does. multicluster-runtime's builder takes only the cache sync
// timeout from them (and a concurrency per kind, for a controller built For one, which this is
// not): the agent's --concurrent-reconciles reached its manager, and the member reconciler ran
// one worker whatever it said; nor did a reconcile deadline reach it.
func withManagerDefaults(opts controller.TypedOptions[mcreconcile.Request], global config.Controller) controller.TypedOptions[mcreconcile.Request] {
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = global.MaxConcurrentReconciles
	}
	if opts.ReconciliationTimeout == 0 {
		opts.ReconciliationTimeout = global.ReconciliationTimeout
	}
	return opts
}

func memberDatabaseToCluster(_ context.Context, obj client.Object) []mcreconcile.Request {
	cluster := obj.GetLabels()[dbfleetv1alpha1.LabelCluster]
	if cluster == "" {
		return nil
	}
	return []mcreconcile.Request{{ClusterName: cluster, Request: reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}}}
}

// shareOf maps an object in a member cluster to the MemberDatabase of its database there.
func shareOf(clusterName string, _ cluster.Cluster) handler.TypedEventHandler[client.Object, mcreconcile.Request] {
	return mchandler.TypedEnqueueRequestsFromMapFuncWithClusterPreservation(func(_ context.Context, obj client.Object) []mcreconcile.Request {
		db := obj.GetLabels()[dbfleetv1alpha1.LabelDatabase]
		if db == "" {
			return nil
		}
		return []mcreconcile.Request{{ClusterName: clusterName, Request: reconcile.Request{NamespacedName: types.NamespacedName{
			Namespace: dbfleetv1alpha1.MemberNamespace(clusterName),
			Name:      dbfleetv1alpha1.MemberDatabaseName(obj.GetNamespace(), db),
		}}}}
	})
}
