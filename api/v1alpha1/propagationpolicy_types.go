package v1alpha1

import (
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceSelector picks DatabaseClusters by name or by labels. A selector with neither selects
// every DatabaseCluster in the policy's scope.
//
// Everything the hub could not match is refused at admission, because a selector the hub cannot
// use would otherwise select nothing without a word: a name or namespace no DatabaseCluster can
// have, a labelSelector that labels.Selector cannot parse, and a name together with a
// labelSelector (the labelSelector would be ignored).
// +kubebuilder:validation:XValidation:rule="!has(self.name) || !has(self.labelSelector)",message="set name or labelSelector, not both: labelSelector is ignored when name is set"
type ResourceSelector struct {
	// Namespace restricts a ClusterPropagationPolicy's selector to one namespace. A
	// PropagationPolicy selects only in its own namespace and must leave it empty.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Name selects the DatabaseCluster with this name. A name is more precise than labels:
	// between policies of equal priority, a name match wins. It must be a name a DatabaseCluster
	// can have: a DNS label of at most 52 characters.
	// +kubebuilder:validation:MaxLength=52
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`

	// LabelSelector selects DatabaseClusters by label, with the meaning and the rules of
	// metav1.LabelSelector: operators In and NotIn need values, Exists and DoesNotExist take none,
	// keys are label keys and values label values. Not together with name. (Values are checked by
	// a schema pattern that hack/crdbounds adds: as CEL rules they would exceed the cost budget.)
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions[].operator must be In, NotIn, Exists or DoesNotExist",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['In', 'NotIn']) || (has(e.values) && e.values.size() > 0))",message="matchExpressions[].values must not be empty for operator In or NotIn",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || e.values.size() == 0)",message="matchExpressions[].values must be empty for operator Exists or DoesNotExist",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !format.qualifiedName().validate(e.key).hasValue())",message="matchExpressions[].key must be a label key: an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric",fieldPath=".matchExpressions"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.all(k, !format.qualifiedName().validate(k).hasValue())",message="matchLabels keys must be label keys: an optional DNS subdomain prefix and '/', then at most 63 alphanumerics, '-', '_' or '.', beginning and ending with an alphanumeric",fieldPath=".matchLabels"
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// PurgeMode says how the replicas left on a cluster that is being evicted go away.
// +kubebuilder:validation:Enum=Immediately;Gracefully;Never
type PurgeMode string

const (
	// PurgeImmediately deletes the old share as soon as the replacement is scheduled.
	PurgeImmediately PurgeMode = "Immediately"
	// PurgeGracefully keeps the old share until the replacement is Ready or gracePeriodSeconds ends.
	PurgeGracefully PurgeMode = "Gracefully"
	// PurgeNever keeps the old share until a person removes it.
	PurgeNever PurgeMode = "Never"
)

// DecisionConditions says when an unhealthy share counts as failed (Karmada's name).
type DecisionConditions struct {
	// TolerationSeconds is how long a share may stay not Available before it is moved.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=300
	// +optional
	TolerationSeconds *int32 `json:"tolerationSeconds,omitempty"`
}

// ApplicationFailoverBehavior moves a share whose replicas stay unavailable (Karmada's names).
// +kubebuilder:validation:XValidation:rule="!has(self.gracePeriodSeconds) || self.purgeMode == 'Gracefully'",message="gracePeriodSeconds applies only when purgeMode is Gracefully",fieldPath=".gracePeriodSeconds"
type ApplicationFailoverBehavior struct {
	// DecisionConditions say when the share counts as failed.
	// +kubebuilder:default={}
	// +optional
	DecisionConditions DecisionConditions `json:"decisionConditions,omitempty"`

	// PurgeMode says how the old share goes away: Immediately, Gracefully (default) or Never.
	// +kubebuilder:default=Gracefully
	// +optional
	PurgeMode PurgeMode `json:"purgeMode,omitempty"`

	// GracePeriodSeconds is the longest the old share is kept waiting for the replacement to become
	// Ready when purgeMode is Gracefully. Defaults to 600.
	// +kubebuilder:validation:Minimum=1
	// +optional
	GracePeriodSeconds *int32 `json:"gracePeriodSeconds,omitempty"`
}

// ClusterFailoverBehavior says how a share leaves a cluster that a NoExecute taint evicted (the
// eviction itself comes from the taint and the placement's clusterTolerations).
// +kubebuilder:validation:XValidation:rule="!has(self.gracePeriodSeconds) || self.purgeMode == 'Gracefully'",message="gracePeriodSeconds applies only when purgeMode is Gracefully",fieldPath=".gracePeriodSeconds"
type ClusterFailoverBehavior struct {
	// PurgeMode says how the evicted share goes away: Immediately, Gracefully (default: kept until
	// its replacements are Ready or gracePeriodSeconds ends) or Never (kept until a person deletes
	// its MemberDatabase).
	// +kubebuilder:default=Gracefully
	// +optional
	PurgeMode PurgeMode `json:"purgeMode,omitempty"`

	// GracePeriodSeconds is the longest the evicted share is kept waiting for its replacements to
	// become Ready when purgeMode is Gracefully. Defaults to 600.
	// +kubebuilder:validation:Minimum=1
	// +optional
	GracePeriodSeconds *int32 `json:"gracePeriodSeconds,omitempty"`
}

// FailoverBehavior says how shares move away from failing clusters or applications. Cluster
// failover itself is driven by the NoExecute taints and clusterTolerations of the placement.
type FailoverBehavior struct {
	// Cluster says how shares leave evicted clusters. Without it: purgeMode Gracefully, 600 s.
	// +optional
	Cluster *ClusterFailoverBehavior `json:"cluster,omitempty"`

	// Application moves shares whose replicas stay unavailable. Without it, application failover
	// is off.
	// +optional
	Application *ApplicationFailoverBehavior `json:"application,omitempty"`
}

// DefaultGracePeriodSeconds is how long an evicted share is kept, at most, waiting for its
// replacements to become Ready when the policy does not say.
const DefaultGracePeriodSeconds = 600

// PropagationSpec says which DatabaseClusters go where. It is shared by PropagationPolicy and
// ClusterPropagationPolicy.
type PropagationSpec struct {
	// ResourceSelectors pick the DatabaseClusters this policy places; at least one is required.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +required
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`

	// Priority orders competing policies: the highest wins. Ties go to the more precise selector
	// (name over labels), then to a PropagationPolicy over a ClusterPropagationPolicy, then to the
	// name that sorts first.
	// +kubebuilder:default=0
	// +optional
	Priority *int32 `json:"priority,omitempty"`

	// Placement is Karmada's policy/v1alpha1 Placement: cluster affinity, tolerations, spread
	// constraints and replica scheduling.
	// +kubebuilder:validation:XValidation:rule="!(has(self.clusterAffinity) && has(self.clusterAffinities))",message="clusterAffinity and clusterAffinities cannot both be set"
	// +kubebuilder:validation:XValidation:rule="!has(self.replicaScheduling) || self.replicaScheduling.replicaSchedulingType != 'Duplicated' || (!has(self.replicaScheduling.replicaDivisionPreference) && !has(self.replicaScheduling.weightPreference))",message="replicaDivisionPreference and weightPreference apply only to Divided scheduling, not Duplicated",fieldPath=".replicaScheduling"
	// +kubebuilder:validation:XValidation:rule="!has(self.replicaScheduling) || !has(self.replicaScheduling.weightPreference) || !has(self.replicaScheduling.replicaDivisionPreference) || self.replicaScheduling.replicaDivisionPreference == 'Weighted'",message="weightPreference applies only when replicaDivisionPreference is Weighted",fieldPath=".replicaScheduling.weightPreference"
	// +kubebuilder:validation:XValidation:rule="!has(self.replicaScheduling) || !has(self.replicaScheduling.weightPreference) || !has(self.replicaScheduling.weightPreference.staticWeightList) || !has(self.replicaScheduling.weightPreference.dynamicWeight)",message="staticWeightList and dynamicWeight cannot both be set",fieldPath=".replicaScheduling.weightPreference"
	// +kubebuilder:validation:XValidation:rule="!has(self.spreadConstraints) || self.spreadConstraints.all(c, !has(c.minGroups) || !has(c.maxGroups) || c.minGroups <= c.maxGroups)",message="spreadConstraints: minGroups must not exceed maxGroups",fieldPath=".spreadConstraints"
	// +kubebuilder:validation:XValidation:rule="!has(self.spreadConstraints) || self.spreadConstraints.all(c, (!has(c.minGroups) || c.minGroups >= 0) && (!has(c.maxGroups) || c.maxGroups >= 0))",message="spreadConstraints: minGroups and maxGroups must not be negative",fieldPath=".spreadConstraints"
	// +kubebuilder:validation:XValidation:rule="!has(self.spreadConstraints) || self.spreadConstraints.all(c, !has(c.spreadByLabel))",message="spreadConstraints.spreadByLabel is not supported yet: use spreadByField (cluster, region, zone or provider)",fieldPath=".spreadConstraints"
	// +kubebuilder:validation:XValidation:rule="!has(self.spreadConstraints) || self.spreadConstraints.all(c, self.spreadConstraints.exists_one(d, (has(d.spreadByField) ? d.spreadByField : 'cluster') == (has(c.spreadByField) ? c.spreadByField : 'cluster')))",message="spreadConstraints: each spreadByField may appear only once",fieldPath=".spreadConstraints"
	// +kubebuilder:validation:XValidation:rule="!has(self.clusterAffinity) || !has(self.clusterAffinity.fieldSelector) || !has(self.clusterAffinity.fieldSelector.matchExpressions) || self.clusterAffinity.fieldSelector.matchExpressions.all(e, e.key in ['provider', 'region', 'zone'] && e.operator in ['In', 'NotIn'])",message="clusterAffinity.fieldSelector: key must be provider, region or zone and operator In or NotIn",fieldPath=".clusterAffinity.fieldSelector"
	// +kubebuilder:validation:XValidation:rule="!has(self.clusterAffinities) || self.clusterAffinities.all(a, !has(a.fieldSelector) || !has(a.fieldSelector.matchExpressions) || a.fieldSelector.matchExpressions.all(e, e.key in ['provider', 'region', 'zone'] && e.operator in ['In', 'NotIn']))",message="clusterAffinities[].fieldSelector: key must be provider, region or zone and operator In or NotIn",fieldPath=".clusterAffinities"
	// +kubebuilder:validation:XValidation:rule="!has(self.clusterTolerations) || self.clusterTolerations.all(t, !has(t.effect) || t.effect != 'PreferNoSchedule')",message="clusterTolerations with effect PreferNoSchedule are not supported yet: use NoSchedule or NoExecute",fieldPath=".clusterTolerations"
	// +required
	Placement policyv1alpha1.Placement `json:"placement"`

	// Failover says how shares move away from failing clusters and applications.
	// +optional
	Failover *FailoverBehavior `json:"failover,omitempty"`
}

// PropagationPolicy places the DatabaseClusters of its own namespace.
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=pp,categories=dbfleet
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Scheduling",type=string,JSONPath=`.spec.placement.replicaScheduling.replicaSchedulingType`
// +kubebuilder:printcolumn:name="Division",type=string,JSONPath=`.spec.placement.replicaScheduling.replicaDivisionPreference`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self.resourceSelectors.all(s, !has(s.namespace) || s.namespace.size() == 0)",message="resourceSelectors[].namespace must be empty: a PropagationPolicy selects only in its own namespace",fieldPath=".resourceSelectors"
	// +required
	Spec PropagationSpec `json:"spec"`
}

// PropagationPolicyList is a list of PropagationPolicies.
// +kubebuilder:object:root=true
type PropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PropagationPolicy `json:"items"`
}

// ClusterPropagationPolicy places DatabaseClusters in every namespace (or those its selectors name).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=cpp,categories=dbfleet
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Scheduling",type=string,JSONPath=`.spec.placement.replicaScheduling.replicaSchedulingType`
// +kubebuilder:printcolumn:name="Division",type=string,JSONPath=`.spec.placement.replicaScheduling.replicaDivisionPreference`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterPropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PropagationSpec `json:"spec"`
}

// ClusterPropagationPolicyList is a list of ClusterPropagationPolicies.
// +kubebuilder:object:root=true
type ClusterPropagationPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPropagationPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PropagationPolicy{}, &PropagationPolicyList{},
		&ClusterPropagationPolicy{}, &ClusterPropagationPolicyList{})
}
