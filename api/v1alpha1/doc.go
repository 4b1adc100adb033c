// Package v1alpha1 holds the dbfleet.io/v1alpha1 API: DatabaseCluster, PropagationPolicy,
// ClusterPropagationPolicy, MemberCluster and MemberDatabase.
//
// Validation lives in the schema (kubebuilder markers and CEL rules), so the API server rejects
// bad objects at admission with a message naming the field; controllers may assume it held.
//
// +kubebuilder:object:generate=true
// +groupName=dbfleet.io
package v1alpha1
