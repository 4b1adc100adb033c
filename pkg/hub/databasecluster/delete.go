package databasecluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// cleanupRecheck bounds how long a blocked deletion waits before it is looked at again, in case
// the event that unblocks it is missed.
const cleanupRecheck = 30 * time.Second

// reconcileDelete removes every MemberDatabase and keeps the finalizer until each is gone, which
// happens when its agent has removed the share from its member cluster and dropped the agent's
// finalizer. The Progressing condition names the clusters that block deletion. The force-delete
// annotation drops the agents' finalizers instead of waiting for them.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	dbc := s.dbc
	force := dbc.Annotations[dbfleetv1alpha1.AnnotationForceDelete] == "true"
	var waiting []string
	for cluster, mdb := range s.memberDBs {
		if mdb.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, mdb); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete MemberDatabase for cluster %s: %w", cluster, err)
			}
			memberDatabaseWrites.WithLabelValues("delete").Inc()
		}
		if force && controllerutil.ContainsFinalizer(mdb, dbfleetv1alpha1.MemberDatabaseFinalizer) {
			patched := mdb.DeepCopy()
			controllerutil.RemoveFinalizer(patched, dbfleetv1alpha1.MemberDatabaseFinalizer)
			if err := r.Client.Patch(ctx, patched, client.MergeFrom(mdb)); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("force-remove agent finalizer for cluster %s: %w", cluster, err)
			}
			r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, "ForcedDeletion", "Delete",
				"stopped waiting for cluster %s to confirm cleanup; whatever it still runs is left behind", cluster)
			continue
		}
		waiting = append(waiting, cluster)
	}
	if len(waiting) > 0 {
		slices.Sort(waiting)
		meta.SetStatusCondition(&dbc.Status.Conditions, metav1.Condition{
			Type: dbfleetv1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: dbfleetv1alpha1.ReasonWaitingForMemberCleanup,
			Message: fmt.Sprintf("deletion waits for clusters %s to confirm removal of their shares; annotate %s=true to stop waiting",
				strings.Join(waiting, ", "), dbfleetv1alpha1.AnnotationForceDelete),
			ObservedGeneration: dbc.Generation,
		})
		return ctrl.Result{RequeueAfter: cleanupRecheck}, nil
	}
	if controllerutil.RemoveFinalizer(dbc, dbfleetv1alpha1.DatabaseClusterFinalizer) {
		base := dbc.DeepCopy()
		base.Finalizers = append(base.Finalizers, dbfleetv1alpha1.DatabaseClusterFinalizer)
		if err := r.Client.Patch(ctx, dbc, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
		}
	}
	forgetReadiness(dbc.Namespace, dbc.Name)
	return ctrl.Result{}, nil
}
