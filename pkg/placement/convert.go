package placement

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Requests are the per-replica resource requests capacity is measured in: the database
// container's requests, with a limit standing in for a missing request as Kubernetes defaults it.
func Requests(t *v1alpha1.DatabaseTemplate) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range t.Resources.Limits {
		out[name] = q
	}
	for name, q := range t.Resources.Requests {
		out[name] = q
	}
	return out
}

// ClusterFromMember is the engine's view of a MemberCluster for a database whose replicas each
// request `requests` (see Requests).
func ClusterFromMember(mc *v1alpha1.MemberCluster, requests corev1.ResourceList) Cluster {
	available, limited := AvailableReplicas(mc.Status.ResourceSummary, requests)
	return Cluster{
		Name:              mc.Name,
		Labels:            mc.Labels,
		Region:            mc.Spec.Region,
		Zone:              mc.Spec.Zone,
		Provider:          mc.Spec.Provider,
		Taints:            mc.Spec.Taints,
		Ready:             conditionTrue(mc.Status.Conditions, v1alpha1.ConditionReady),
		AvailableReplicas: available,
		Unlimited:         !limited,
	}
}

func conditionTrue(conditions []metav1.Condition, kind string) bool {
	for i := range conditions {
		if conditions[i].Type == kind {
			return conditions[i].Status == metav1.ConditionTrue
		}
	}
	return false
}

// PreviousFromStatus is the decision in force as a DatabaseCluster's status records it, or nil
// when nothing has been placed yet.
func PreviousFromStatus(st *v1alpha1.DatabaseClusterStatus) *Decision {
	if len(st.Placements) == 0 {
		return nil
	}
	d := &Decision{Shares: make([]Share, 0, len(st.Placements))}
	for _, p := range st.Placements {
		d.Shares = append(d.Shares, Share{Cluster: p.Cluster, Replicas: p.Replicas, Ordinals: p.Ordinals})
	}
	if st.Primary != nil {
		d.Primary = st.Primary.Cluster
	}
	return d
}

// Placements renders the shares as status.placements, sorted by cluster, with the primary's
// share marked primary. Ready replicas and states are the hub's to fill in.
func (d *Decision) Placements() []v1alpha1.ClusterPlacement {
	out := make([]v1alpha1.ClusterPlacement, len(d.Shares))
	for i, s := range d.Shares {
		role := v1alpha1.RoleReplica
		if s.Cluster == d.Primary {
			role = v1alpha1.RolePrimary
		}
		out[i] = v1alpha1.ClusterPlacement{Cluster: s.Cluster, Replicas: s.Replicas, Ordinals: s.Ordinals, Role: role}
	}
	return out
}
