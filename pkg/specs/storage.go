package specs

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// dataClaim is the name of the StatefulSet's volume claim template; the claim of pod <db>-<n> is
// data-<db>-<n>.
const dataClaim = "data"

// ClaimTemplateSize is the storage request of a StatefulSet's data claim template.
func ClaimTemplateSize(sts *appsv1.StatefulSet) (resource.Quantity, bool) {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		if t.Name == dataClaim {
			q, ok := t.Spec.Resources.Requests[corev1.ResourceStorage]
			return q, ok
		}
	}
	return resource.Quantity{}, false
}

// SetClaimTemplateSize sets the storage request of a StatefulSet's data claim template.
func SetClaimTemplateSize(sts *appsv1.StatefulSet, size resource.Quantity) {
	for i := range sts.Spec.VolumeClaimTemplates {
		if t := &sts.Spec.VolumeClaimTemplates[i]; t.Name == dataClaim {
			t.Spec.Resources.Requests[corev1.ResourceStorage] = size
		}
	}
}

// IsDataClaim says whether a claim is the data volume of one of the StatefulSet's pods: the
// StatefulSet names it "<template>-<pod>".
func IsDataClaim(sts, claim string) bool {
	pod, ok := strings.CutPrefix(claim, dataClaim+"-")
	if !ok {
		return false
	}
	_, ok = contract.PodOrdinal(sts, pod)
	return ok
}
