package databasecluster

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Indexes of DatabaseClusters that let a MemberCluster change wake only the databases it can
// affect: at 1,000 clusters and 10,000 databases, waking every database on every change of any
// cluster made a failover or a hub restart reconcile the whole fleet many times over.
const (
	// placedOnIndex: the clusters a database has a share or its primary on.
	placedOnIndex = "status.placements.cluster"
	// unscheduledIndex: "true" for a database whose Scheduled condition is not True.
	unscheduledIndex = "status.unscheduled"
)

func indexPlacedOn(obj client.Object) []string {
	dbc, ok := obj.(*dbfleetv1alpha1.DatabaseCluster)
	if !ok {
		return nil
	}
	var clusters []string
	for _, p := range dbc.Status.Placements {
		clusters = append(clusters, p.Cluster)
	}
	if p := dbc.Status.Primary; p != nil && p.Cluster != "" && !slices.Contains(clusters, p.Cluster) {
		clusters = append(clusters, p.Cluster)
	}
	return clusters
}

func indexUnscheduled(obj client.Object) []string {
	dbc, ok := obj.(*dbfleetv1alpha1.DatabaseCluster)
	if !ok || meta.IsStatusConditionTrue(dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled) {
		return nil
	}
	return []string{"true"}
}

// memberClusterHandler maps MemberCluster events to the databases they can affect. A change that
// can only take room away (the cluster turns not Ready, gains a taint, loses capacity, goes away)
// affects the databases placed on it, plus those still waiting for a placement. A change that can
// offer room or change a policy's match (a new cluster, one turning Ready, losing a taint, new
// labels or topology) may change any database, so all are looked at, at low priority: most of
// them keep their placement (it is stable), and at 1,000 clusters, where some cluster comes back
// every few seconds, those looks at the default priority kept all 10,000 databases queued ahead
// of new ones and of the agents' reports. The initial list at start-up wakes nothing: every
// database is reconciled then anyway.
func (r *Reconciler) memberClusterHandler() handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !e.IsInInitialList {
				addWithPriority(q, handler.LowPriority, 0, r.databases(ctx)...)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, okOld := e.ObjectOld.(*dbfleetv1alpha1.MemberCluster)
			cur, okNew := e.ObjectNew.(*dbfleetv1alpha1.MemberCluster)
			if okOld && okNew && !offersRoom(old, cur) {
				addAll(q, r.affectedBy(ctx, cur.Name))
				return
			}
			addWithPriority(q, handler.LowPriority, 0, r.databases(ctx)...)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			addAll(q, r.affectedBy(ctx, e.Object.GetName()))
		},
	}
}

// offersRoom says whether a MemberCluster change may let a database use the cluster where it
// could not before, or change which policies' affinities match it.
func offersRoom(old, cur *dbfleetv1alpha1.MemberCluster) bool {
	if readyStatus(old) != string(metav1.ConditionTrue) && readyStatus(cur) == string(metav1.ConditionTrue) {
		return true
	}
	if !equality.Semantic.DeepEqual(old.Labels, cur.Labels) || old.Spec.Region != cur.Spec.Region ||
		old.Spec.Zone != cur.Spec.Zone || old.Spec.Provider != cur.Spec.Provider {
		return true
	}
	for _, t := range old.Spec.Taints {
		if !slices.ContainsFunc(cur.Spec.Taints, func(c corev1.Taint) bool { return c.MatchTaint(&t) }) {
			return true // a taint went away
		}
	}
	// Capacity moves placed databases only when it shrinks under them (stable placement); new
	// capacity matters to the databases still waiting for a placement.
	return false
}

// affectedBy lists the databases placed on cluster and those waiting for a placement.
func (r *Reconciler) affectedBy(ctx context.Context, cluster string) []reconcile.Request {
	return append(r.databases(ctx, client.MatchingFields{placedOnIndex: cluster}),
		r.databases(ctx, client.MatchingFields{unscheduledIndex: "true"})...)
}

func addAll(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
	for _, req := range reqs {
		q.Add(req)
	}
}

// skipInitialList wraps a map function so that the informer's initial list wakes nothing.
func skipInitialList(fn handler.MapFunc) handler.EventHandler {
	mapped := handler.EnqueueRequestsFromMapFunc(fn)
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !e.IsInInitialList {
				mapped.Create(ctx, e, q)
			}
		},
		UpdateFunc:  mapped.Update,
		DeleteFunc:  mapped.Delete,
		GenericFunc: mapped.Generic,
	}
}
