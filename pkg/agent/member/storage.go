package member

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// storageKept says why a share's volumes keep a size other than the one it asks for.
type storageKept struct {
	reason, message string
}

// growStorage brings the share's volumes to the size it asks for. It expands every bound claim
// of the share that is smaller, when the StorageClasses of all of them allow it, and says
// whether the StatefulSet must be replaced for its claim template to show the new size. When the
// volumes cannot grow (or must not shrink), desired keeps the template's current size and
// storageKept says why. A fenced share's StatefulSet is not replaced: it carries the fenced
// epoch, which must not be out of the API server even for a moment.
func (r *Reconciler) growStorage(ctx context.Context, member client.Client, live client.Reader, mdb *dbfleetv1alpha1.MemberDatabase,
	existing, desired *appsv1.StatefulSet, fenced bool) (replace bool, kept *storageKept, err error) {
	want := mdb.Spec.Database.Storage.Size
	have, ok := specs.ClaimTemplateSize(existing)
	if !ok {
		return false, nil, nil
	}
	if want.Cmp(have) < 0 {
		specs.SetClaimTemplateSize(desired, have)
		return false, &storageKept{reason: dbfleetv1alpha1.ReasonStorageSizeKept, message: fmt.Sprintf(
			"storage size %s is below the %s the volumes were made with: volumes never shrink, they keep %s", want.String(), have.String(), have.String())}, nil
	}
	refused, err := expandClaims(ctx, member, live, mdb, want)
	if err != nil {
		if want.Cmp(have) > 0 {
			specs.SetClaimTemplateSize(desired, have)
		}
		return false, nil, err
	}
	if refused != "" {
		if want.Cmp(have) > 0 {
			specs.SetClaimTemplateSize(desired, have)
		}
		return false, &storageKept{reason: dbfleetv1alpha1.ReasonStorageNotExpandable, message: fmt.Sprintf(
			"storage cannot grow to %s: %s; the volumes keep their size", want.String(), refused)}, nil
	}
	if want.Cmp(have) == 0 {
		return false, nil, nil
	}
	if fenced {
		specs.SetClaimTemplateSize(desired, have)
		return false, &storageKept{reason: dbfleetv1alpha1.ReasonStorageSizeKept, message: fmt.Sprintf(
			"the claims are expanded to %s, but the StatefulSet's claim template keeps %s while the share is fenced: it is replaced once the hub hands out a higher epoch",
			want.String(), have.String())}, nil
	}
	return true, nil, nil
}

// expandClaims asks for want on each bound claim of the share that has less. It changes none
// when the StorageClass of any of them does not allow volume expansion, and then says why.
// Claims not bound yet cannot be resized: a later pass expands them (a pod's change brings the
// share back).
func expandClaims(ctx context.Context, member client.Client, live client.Reader, mdb *dbfleetv1alpha1.MemberDatabase, want resource.Quantity) (refused string, err error) {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := member.List(ctx, claims, client.InNamespace(mdb.Spec.DatabaseRef.Namespace), client.MatchingLabels(specs.SelectorLabels(mdb))); err != nil {
		return "", fmt.Errorf("list PersistentVolumeClaims: %w", err)
	}
	var smaller []*corev1.PersistentVolumeClaim
	for i := range claims.Items {
		pvc := &claims.Items[i]
		if !specs.IsDataClaim(mdb.Spec.DatabaseRef.Name, pvc.Name) {
			continue
		}
		if have, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; !ok || have.Cmp(want) < 0 {
			smaller = append(smaller, pvc)
		}
	}
	expandable := map[string]string{} // StorageClass → why not ("" when it allows expansion)
	for _, pvc := range smaller {
		class := ptr.Deref(pvc.Spec.StorageClassName, "")
		why, seen := expandable[class]
		if !seen {
			if why, err = classRefusesExpansion(ctx, live, class); err != nil {
				return "", err
			}
			expandable[class] = why
		}
		if why != "" {
			return fmt.Sprintf("claim %s: %s", pvc.Name, why), nil
		}
	}
	log := ctrl.LoggerFrom(ctx)
	for _, pvc := range smaller {
		if pvc.Status.Phase != corev1.ClaimBound {
			log.V(1).Info("PersistentVolumeClaim not bound yet: expanded once it is", "PersistentVolumeClaim", pvc.Name, "size", want.String())
			continue
		}
		patched := pvc.DeepCopy()
		if patched.Spec.Resources.Requests == nil {
			patched.Spec.Resources.Requests = corev1.ResourceList{}
		}
		patched.Spec.Resources.Requests[corev1.ResourceStorage] = want
		if err := member.Patch(ctx, patched, client.MergeFrom(pvc)); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("expand PersistentVolumeClaim %s to %s: %w", pvc.Name, want.String(), err)
		}
		log.Info("Expanded PersistentVolumeClaim", "PersistentVolumeClaim", pvc.Name, "size", want.String())
	}
	return "", nil
}

// classRefusesExpansion says why claims of the StorageClass cannot be expanded, or "" when they
// can. It reads the class from the API server, only when a claim is to grow.
func classRefusesExpansion(ctx context.Context, live client.Reader, name string) (string, error) {
	if name == "" {
		return "it has no StorageClass, so it cannot be expanded", nil
	}
	sc := &storagev1.StorageClass{}
	err := live.Get(ctx, client.ObjectKey{Name: name}, sc)
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("its StorageClass %s does not exist", name), nil
	case err != nil:
		return "", fmt.Errorf("read StorageClass %s: %w", name, err)
	case !ptr.Deref(sc.AllowVolumeExpansion, false):
		return fmt.Sprintf("StorageClass %s does not allow volume expansion (allowVolumeExpansion is not true)", name), nil
	}
	return "", nil
}

// replaceStatefulSet deletes the StatefulSet so that it can be created again with a larger claim
// template. Propagation Orphan leaves its pods and claims running: the garbage collector only
// removes their owner references, and the new StatefulSet adopts them. The UID precondition
// makes sure it is the StatefulSet the pass looked at.
func (r *Reconciler) replaceStatefulSet(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, existing, desired *appsv1.StatefulSet) error {
	have, _ := specs.ClaimTemplateSize(existing)
	want, _ := specs.ClaimTemplateSize(desired)
	err := member.Delete(ctx, existing, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &existing.UID})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replace StatefulSet %s/%s to grow its volume claim template: %w", existing.Namespace, existing.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Replacing StatefulSet to grow its volume claim template; its pods keep running",
		"StatefulSet", existing.Name, "from", have.String(), "to", want.String())
	r.event(mdb, corev1.EventTypeNormal, dbfleetv1alpha1.ReasonReplacingStatefulSet, "Replace",
		"StatefulSet %s/%s is replaced (its pods and volumes stay) so that its claim template asks for %s instead of %s",
		existing.Namespace, existing.Name, want.String(), have.String())
	return nil
}
