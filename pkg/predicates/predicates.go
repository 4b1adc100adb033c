package predicates

import (
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// NotStatusOnly lets every event through except an update that changed nothing but the status
// (and the resourceVersion and managed fields that come with it): creates, deletes, and updates
// of the spec (generation), labels or annotations, or the start of a deletion. A controller that
// reports an object's status must not watch its own reports: the agent's MemberDatabase reports
// carry the instances' WAL positions, which move with every write (and with each instance's own
// write check, twice a second), and each report brought its share straight back, a pass about
// every second per share on a busy 2-core machine instead of one every 5 s, each pass applying
// the share's objects and reading its credentials from the hub.
func NotStatusOnly() predicate.Predicate {
	return predicate.Or(
		predicate.GenerationChangedPredicate{},
		predicate.LabelChangedPredicate{},
		predicate.AnnotationChangedPredicate{},
		DeletionStarted(),
	)
}

// DeletionStarted passes the update that sets the deletion timestamp (and no other update).
func DeletionStarted() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
		},
	}
}
