package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberClusterReportStatus is what an agent observed of its member cluster.
type MemberClusterReportStatus struct {
	// Conditions: Ready (True when the agent reaches its member API server, False with the error
	// when it cannot).
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Agent are the settings the agent runs with.
	// +optional
	Agent *AgentSettings `json:"agent,omitempty"`

	// KubernetesVersion of the member's API server.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// ResourceSummary is the member's capacity.
	// +optional
	ResourceSummary *ResourceSummary `json:"resourceSummary,omitempty"`
}

// MemberClusterReport is an agent's report on its member cluster. It lives on the hub in the
// cluster's own namespace, member-<cluster>, and is named after the cluster; the agent writes it
// and the hub copies it into the MemberCluster's status (a report under any other name is
// ignored). It exists so that an agent's credentials touch nothing outside member-<cluster>: a
// cluster-scoped grant per agent (a ClusterRoleBinding to its own MemberCluster) costs the hub
// API server an RBAC scan of every agent's binding on every request of every client.
// KubeFleet's InternalMemberCluster plays the same part.
//
// There is no status subresource: the agent owns the whole object, and one write carries it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=mcr,categories=dbfleet
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.status.agent.version`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberClusterReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status MemberClusterReportStatus `json:"status,omitempty"`
}

// MemberClusterReportList is a list of MemberClusterReports.
// +kubebuilder:object:root=true
type MemberClusterReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberClusterReport `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MemberClusterReport{}, &MemberClusterReportList{})
}
