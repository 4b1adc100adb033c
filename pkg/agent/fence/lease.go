package fence

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// RenewPrimaryLease makes the Lease name holder, valid from renewed for fenceAfter rounded down to
// whole seconds. Callers pass the start of the last successful hub renewal as renewed, so the
// Lease never outlives the hub lease's freshness. A fenceAfter under MinFenceAfter is refused:
// it would be a Lease of 0 s.
func RenewPrimaryLease(ctx context.Context, member client.Client, namespace, db, holder string, renewed time.Time, fenceAfter time.Duration, labels map[string]string) error {
	if fenceAfter < MinFenceAfter {
		return fmt.Errorf("primary lease of %s: fenceAfter must be at least %s", fenceAfter, MinFenceAfter)
	}
	key := client.ObjectKey{Namespace: namespace, Name: contract.PrimaryLeaseName(db)}
	lease := &coordinationv1.Lease{}
	err := member.Get(ctx, key, lease)
	renew := metav1.NewMicroTime(renewed)
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       ptr.To(holder),
		LeaseDurationSeconds: ptr.To(SecondsDown(fenceAfter)),
		RenewTime:            &renew,
	}
	if apierrors.IsNotFound(err) {
		spec.AcquireTime = &renew
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: key.Name, Labels: labels}, Spec: spec}
		if err := member.Create(ctx, lease); err != nil {
			return fmt.Errorf("create primary lease: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read primary lease: %w", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != holder {
		spec.AcquireTime = &renew
	} else {
		spec.AcquireTime = lease.Spec.AcquireTime
		if lease.Spec.RenewTime != nil && !renewed.After(lease.Spec.RenewTime.Time) {
			return nil // nothing newer to say
		}
	}
	// The whole spec as a merge patch, without the resourceVersion: the read above comes from
	// the agent's cache, which a member API server that restarted can leave stale for a minute,
	// and an update from it was refused as a conflict renewal after renewal (the end-to-end suite:
	// the primary ran on its failsafe for 60 s after its API server came back). Only this agent
	// writes the Lease, under the share's lock; every field is written, whatever the cache says.
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return fmt.Errorf("renew primary lease: %w", err)
	}
	if err := member.Patch(ctx, lease, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("renew primary lease: %w", err)
	}
	return nil
}

// ReleasePrimaryLease deletes the member-local primary Lease if this cluster holds it at an epoch
// below epoch: a demoted primary must stop writing at once, not when the Lease runs out.
func ReleasePrimaryLease(ctx context.Context, member client.Client, namespace, db, cluster string, epoch int64) error {
	lease := &coordinationv1.Lease{}
	if err := member.Get(ctx, client.ObjectKey{Namespace: namespace, Name: contract.PrimaryLeaseName(db)}, lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == contract.Holder(cluster, epoch) {
		return nil
	}
	holderCluster, holderEpoch, ok := contract.ParseHolder(*lease.Spec.HolderIdentity)
	if !ok || holderCluster != cluster || holderEpoch >= epoch {
		return nil
	}
	if err := member.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("release primary lease: %w", err)
	}
	return nil
}
