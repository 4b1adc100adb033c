package databasecluster

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// refuseReservedNamespace says whether the DatabaseCluster lives in a namespace that may hold no
// database; if so it marks it not scheduled, with an Event the first time. The hub chart's
// admission policy refuses such DatabaseClusters before they exist; this is for a hub installed
// without it, or for one created before it was. Nothing is placed, and shares already placed are
// left as they are (their agents refuse them too): the user's data is not touched.
func (r *Reconciler) refuseReservedNamespace(dbc *dbfleetv1alpha1.DatabaseCluster) bool {
	before := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled).DeepCopy()
	if !scheduling.RefuseReservedNamespace(dbc) {
		return false
	}
	if before == nil || before.Reason != dbfleetv1alpha1.ReasonReservedNamespace {
		after := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionScheduled)
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, dbfleetv1alpha1.ReasonReservedNamespace, "Schedule", "%s", after.Message)
	}
	return true
}
