package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SyncMode says which side drives a member cluster.
// +kubebuilder:validation:Enum=Pull;Push
type SyncMode string

const (
	// SyncPull: an agent in the member cluster watches the hub and reconciles locally.
	SyncPull SyncMode = "Pull"
	// SyncPush: the hub reconciles the member cluster directly through a kubeconfig.
	SyncPush SyncMode = "Push"
)

// SecretReference names a Secret on the hub.
type SecretReference struct {
	// Namespace of the Secret.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// MemberClusterSpec describes a joined cluster.
// +kubebuilder:validation:XValidation:rule="self.syncMode != 'Push' || has(self.kubeconfigSecretRef)",message="kubeconfigSecretRef is required when syncMode is Push",fieldPath=".kubeconfigSecretRef",reason="FieldValueRequired"
type MemberClusterSpec struct {
	// Region of the cluster, for affinity and spread constraints.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Region string `json:"region,omitempty"`

	// Zone of the cluster, for affinity and spread constraints.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Zone string `json:"zone,omitempty"`

	// Provider of the cluster (for example aws, gcp, on-prem), for affinity and spread constraints.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Provider string `json:"provider,omitempty"`

	// Taints keep DatabaseClusters off the cluster unless their policy tolerates them. The hub
	// manages the dbfleet.io/unreachable and dbfleet.io/not-ready taints itself.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(t, t.effect in ['NoSchedule', 'NoExecute'])",message="taints[].effect must be NoSchedule or NoExecute"
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`

	// SyncMode is Pull (an agent in the member cluster, the default) or Push (the hub reconciles
	// the member through kubeconfigSecretRef). It cannot change after joining.
	// +kubebuilder:default=Pull
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="syncMode is immutable: unjoin and join the cluster again"
	// +optional
	SyncMode SyncMode `json:"syncMode,omitempty"`

	// KubeconfigSecretRef names a hub Secret whose "kubeconfig" key reaches the member cluster.
	// Required for Push.
	// +optional
	KubeconfigSecretRef *SecretReference `json:"kubeconfigSecretRef,omitempty"`

	// DatabaseNetwork is how the databases' instances in this cluster are reached from other
	// clusters (and clients): PodIP (the default: pod IPs route between members, as with Cilium
	// ClusterMesh, Calico BGP or the local federation), LoadBalancer (a LoadBalancer Service in
	// front of the primary) or ClusterSetIP (an MCS ServiceExport of the read-write Service,
	// reached as <db>-rw.<namespace>.svc.clusterset.local).
	// +kubebuilder:default=PodIP
	// +optional
	DatabaseNetwork DatabaseNetwork `json:"databaseNetwork,omitempty"`
}

// DatabaseNetwork is how a member cluster's database instances are reached from outside it.
// +kubebuilder:validation:Enum=PodIP;LoadBalancer;ClusterSetIP
type DatabaseNetwork string

const (
	DatabaseNetworkPodIP        DatabaseNetwork = "PodIP"
	DatabaseNetworkLoadBalancer DatabaseNetwork = "LoadBalancer"
	DatabaseNetworkClusterSetIP DatabaseNetwork = "ClusterSetIP"
)

// AgentSettings are the timings an agent runs with, as it reports them.
type AgentSettings struct {
	// HeartbeatIntervalSeconds is how often the agent renews its hub Lease.
	// +optional
	HeartbeatIntervalSeconds int32 `json:"heartbeatIntervalSeconds,omitempty"`
	// FenceAfterSeconds is how long the agent keeps its primaries without a hub renewal.
	// +optional
	FenceAfterSeconds int32 `json:"fenceAfterSeconds,omitempty"`
	// Version of the agent.
	// +optional
	Version string `json:"version,omitempty"`
}

// ResourceSummary is the member's capacity (Karmada's shape).
type ResourceSummary struct {
	// Allocatable is the sum of the member Nodes' allocatable resources.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Allocated is the sum of the resource requests of the member's scheduled Pods.
	// +optional
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
}

// MemberClusterStatus is what the hub and the agent observed.
type MemberClusterStatus struct {
	// Conditions: Ready (Unknown when the agent's lease lapses) and AgentConnected.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastHeartbeat is when the hub last observed the agent renew its Lease, on the hub's clock.
	// +optional
	LastHeartbeat *metav1.Time `json:"lastHeartbeat,omitempty"`

	// Agent are the settings the agent reports.
	// +optional
	Agent *AgentSettings `json:"agent,omitempty"`

	// KubernetesVersion of the member's API server.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`

	// ResourceSummary is the member's capacity.
	// +optional
	ResourceSummary *ResourceSummary `json:"resourceSummary,omitempty"`
}

// MemberCluster is a cluster joined to the hub.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 56 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label of at most 56 characters: the hub keeps the cluster's objects in namespace member-<name>"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mc,categories=dbfleet
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.spec.region`
// +kubebuilder:printcolumn:name="Zone",type=string,JSONPath=`.spec.zone`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.syncMode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`,priority=1
// +kubebuilder:printcolumn:name="Heartbeat",type=date,JSONPath=`.status.lastHeartbeat`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec MemberClusterSpec `json:"spec,omitempty"`
	// +optional
	Status MemberClusterStatus `json:"status,omitempty"`
}

// MemberClusterList is a list of MemberClusters.
// +kubebuilder:object:root=true
type MemberClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MemberCluster{}, &MemberClusterList{})
}
