package member

import (
	"context"
	"errors"
	"fmt"
	"math"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// cleanup removes the share's objects from the member cluster, then lets the MemberDatabase go
// by dropping the agent's finalizer: that is the hub's confirmation. Volumes follow the
// StatefulSet's retention policy (kept unless the user asked for Delete).
func (r *Reconciler) cleanup(ctx context.Context, hub, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, cluster string) error {
	ns, name := mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name
	for _, obj := range specs.ShareObjects(ns, name) {
		if err := deleteOwned(ctx, member, obj); err != nil {
			return err
		}
	}
	// ClusterSetIP mode exported the share's Services to the clusterset: the exports go too, or
	// other clusters would go on resolving a name for a database this cluster no longer runs. A
	// member without the MCS API has none.
	for _, svc := range []string{specs.ReadWriteServiceName(name), specs.ReadOnlyServiceName(name)} {
		if err := ensureServiceExport(ctx, member, mdb, svc, false); err != nil && !errors.Is(err, errNoMCS) {
			return err
		}
	}
	// Whatever epoch it names, this cluster's primary Lease goes with the share: a database
	// re-created under the same name must not find a stale but unexpired Lease here.
	if err := fence.ReleasePrimaryLease(ctx, member, ns, name, cluster, math.MaxInt64); err != nil {
		return err
	}
	if controllerutil.ContainsFinalizer(mdb, dbfleetv1alpha1.MemberDatabaseFinalizer) {
		patched := mdb.DeepCopy()
		controllerutil.RemoveFinalizer(patched, dbfleetv1alpha1.MemberDatabaseFinalizer)
		if err := hub.Patch(ctx, patched, client.MergeFrom(mdb)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove finalizer: %w", err)
		}
	}
	ctrl.LoggerFrom(ctx).Info("Removed share from member cluster")
	return nil
}
