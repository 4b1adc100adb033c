package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FailoverMode says whether the hub moves the primary on its own.
// +kubebuilder:validation:Enum=Automatic;Manual
type FailoverMode string

const (
	// FailoverAutomatic lets the hub promote a new primary cluster when the old one is lost.
	FailoverAutomatic FailoverMode = "Automatic"
	// FailoverManual makes the hub report a lost primary and wait for the user.
	FailoverManual FailoverMode = "Manual"
)

// PrimarySpec says where the primary should run and how it fails over.
type PrimarySpec struct {
	// PreferredClusters lists clusters for the primary, most preferred first. Changing the first
	// entry is a planned switchover.
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +optional
	PreferredClusters []string `json:"preferredClusters,omitempty"`

	// Failover is Automatic (the hub promotes elsewhere when the primary's cluster is lost) or
	// Manual (the hub only reports it).
	// +kubebuilder:default=Automatic
	// +optional
	Failover FailoverMode `json:"failover,omitempty"`
}

// DatabaseClusterSpec is the desired database.
// +kubebuilder:validation:XValidation:rule="!has(self.postgres) || !has(self.postgres.synchronous) || self.postgres.synchronous.number < self.replicas",message="postgres.synchronous.number must be below replicas: the primary is not its own standby",fieldPath=".postgres.synchronous.number"
type DatabaseClusterSpec struct {
	DatabaseTemplate `json:",inline"`

	// Replicas is the number of database instances across the whole fleet, primary included.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	Replicas int32 `json:"replicas"`

	// Primary places and fails over the primary.
	// +optional
	Primary *PrimarySpec `json:"primary,omitempty"`
}

// PolicyReference names the (Cluster)PropagationPolicy that placed a DatabaseCluster.
type PolicyReference struct {
	// Kind is PropagationPolicy or ClusterPropagationPolicy.
	Kind string `json:"kind"`
	// Namespace is empty for a ClusterPropagationPolicy.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the policy.
	Name string `json:"name"`
	// Generation of the policy when it last placed this DatabaseCluster; a newer one re-places it.
	// +optional
	Generation int64 `json:"generation,omitempty"`
}

// PrimaryStatus is where the primary runs now.
type PrimaryStatus struct {
	// Cluster holds the primary.
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// Pod is the primary pod (<db>-<ordinal>) in the cluster's share: when the hub promotes a
	// share it picks the share's instance furthest in the WAL (received, then replayed LSN; with
	// dataDurability required, of the synchronous standbys), and the pod stays for the epoch.
	// Absent (a status written before it existed): the share's lowest ordinal.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Pod string `json:"pod,omitempty"`
	// Epoch goes up by one every time the primary moves to another cluster. Agents act only on the
	// newest epoch, so an epoch that wrapped around would look older than every one before it: the
	// API server refuses any below 1.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Epoch int64 `json:"epoch,omitempty"`
	// Since is when the primary took this cluster and epoch.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// Preferred is the first of spec.primary.preferredClusters that the primary has honoured:
	// it is set when the primary is on that cluster (or when there is no preference), and a
	// failover away from that cluster keeps it, so the primary does not move back on its own
	// when the cluster returns. While the spec's first preference differs from it, a planned
	// switchover is asked for; it happens once that cluster can take the primary
	// (FailoverInProgress=False, SwitchoverPending, says why meanwhile).
	// +optional
	Preferred string `json:"preferred,omitempty"`
	// PromoteAfterLSN is the final LSN of the old primary that a planned switchover handed to
	// this primary (its share's spec.promoteAfterLSN): it was promoted only after it had replayed
	// past it. Empty when the primary came by a failover or was the first.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	PromoteAfterLSN string `json:"promoteAfterLSN,omitempty"`
}

// OrdinalRange is a contiguous range of StatefulSet ordinals, unique across the fleet.
type OrdinalRange struct {
	// Start is the first ordinal (StatefulSet spec.ordinals.start, which cannot be negative).
	// +kubebuilder:validation:Minimum=0
	Start int32 `json:"start"`
	// Count is the number of ordinals.
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
}

// ReplicaRole is the role of a cluster's share.
// +kubebuilder:validation:Enum=primary;replica
type ReplicaRole string

const (
	// RolePrimary: the share holds the primary (the pod status.primary.pod names).
	RolePrimary ReplicaRole = "primary"
	// RoleReplica: every instance of the share is a replica.
	RoleReplica ReplicaRole = "replica"
)

// PlacementState summarises one cluster's share.
type PlacementState string

const (
	PlacementPending     PlacementState = "Pending"
	PlacementProgressing PlacementState = "Progressing"
	PlacementAvailable   PlacementState = "Available"
	PlacementDegraded    PlacementState = "Degraded"
	PlacementEvicting    PlacementState = "Evicting"
	// PlacementUnknown: the cluster's agent is silent, so nothing it last said is trusted.
	PlacementUnknown PlacementState = "Unknown"
)

// ClusterPlacement is one cluster's share of a DatabaseCluster.
type ClusterPlacement struct {
	// Cluster is the MemberCluster name.
	Cluster string `json:"cluster"`
	// Replicas the cluster runs.
	Replicas int32 `json:"replicas"`
	// Ordinals are the StatefulSet ordinals of this share.
	Ordinals OrdinalRange `json:"ordinals"`
	// ReadyReplicas as last reported by the cluster's agent.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Role of the share.
	// +optional
	Role ReplicaRole `json:"role,omitempty"`
	// State summarises the share.
	// +optional
	State PlacementState `json:"state,omitempty"`
	// Version is the engine version the share really runs, as its agent last reported it
	// (MemberDatabase status.version); empty until it has.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Version string `json:"version,omitempty"`
}

// EvictionReason says why a share left its cluster.
// +kubebuilder:validation:Enum=ClusterFailure;ApplicationFailure;Migration
type EvictionReason string

const (
	// EvictionClusterFailure: a NoExecute taint (unreachable, not ready) outlived its toleration.
	EvictionClusterFailure EvictionReason = "ClusterFailure"
	// EvictionApplicationFailure: the share stayed not Available past the policy's
	// failover.application.decisionConditions.tolerationSeconds.
	EvictionApplicationFailure EvictionReason = "ApplicationFailure"
	// EvictionMigration: a planned change (policy, affinity, rebalance) moved the share away.
	EvictionMigration EvictionReason = "Migration"
)

// Eviction is a share that left the placement but is kept in its cluster (as replicas at the
// current epoch) until it may be purged: graceful eviction never removes capacity before its
// replacement is Ready.
type Eviction struct {
	// Cluster is the MemberCluster the share is leaving.
	Cluster string `json:"cluster"`
	// Replicas the share still runs.
	Replicas int32 `json:"replicas"`
	// Ordinals of the share; new shares never reuse them while it is kept.
	Ordinals OrdinalRange `json:"ordinals"`
	// ReadyReplicas as last reported by the cluster's agent.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Reason the share left.
	Reason EvictionReason `json:"reason"`
	// PurgeMode says when the kept share is removed.
	PurgeMode PurgeMode `json:"purgeMode"`
	// Since is when the share was evicted.
	Since metav1.Time `json:"since"`
	// PurgeAfter is when a Gracefully kept share is removed even if its replacements are not Ready.
	// +optional
	PurgeAfter *metav1.Time `json:"purgeAfter,omitempty"`
}

// DatabaseClusterStatus is what the hub observed and decided.
type DatabaseClusterStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas placed across the fleet.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas of the placed shares across the fleet. Evicted shares that are kept report
	// theirs in evictions[].readyReplicas.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Ready is "readyReplicas/replicas", for kubectl.
	// +optional
	Ready string `json:"ready,omitempty"`
	// Clusters lists the clusters holding a share, comma-separated, for kubectl (a printer column
	// can show only one element of a list).
	// +optional
	Clusters string `json:"clusters,omitempty"`
	// Policy is the policy that placed this DatabaseCluster.
	// +optional
	Policy *PolicyReference `json:"policy,omitempty"`
	// Primary is where the primary runs now.
	// +optional
	Primary *PrimaryStatus `json:"primary,omitempty"`
	// Endpoints are where clients reach the database (postgres): readWrite is the primary as the
	// primary's cluster exposes it (spec.databaseNetwork of its MemberCluster), readOnly the
	// standbys.
	// +optional
	Endpoints *DatabaseEndpoints `json:"endpoints,omitempty"`
	// Placements are the clusters' shares, sorted by cluster name.
	// +listType=map
	// +listMapKey=cluster
	// +optional
	Placements []ClusterPlacement `json:"placements,omitempty"`
	// Evictions are shares that left the placement and are kept until they may be purged. A
	// cluster listed here gets no new share of this DatabaseCluster until its entry is gone.
	// +listType=map
	// +listMapKey=cluster
	// +optional
	Evictions []Eviction `json:"evictions,omitempty"`
	// Synchronous is what the hub knows of the primary's synchronous replication
	// (spec.postgres.synchronous), kept here so that it outlives the primary's cluster and a hub
	// restart: with dataDurability required, a failover promotes only a standby in it.
	// +optional
	Synchronous *SynchronousStatus `json:"synchronous,omitempty"`
	// ObservedRebalance is the value of the dbfleet.io/rebalance annotation that the hub last
	// acted on: setting the annotation to a new value asks for a full re-placement.
	// +optional
	ObservedRebalance string `json:"observedRebalance,omitempty"`
	// Conditions: Scheduled, Propagated, Available, Progressing, Degraded, FailoverInProgress,
	// CredentialsReady (postgres).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// The conditions of a DatabaseCluster, each with the reasons the hub gives it. Every one carries
// observedGeneration; lastTransitionTime changes only when the status does.
const (
	// ConditionScheduled says whether a policy matched and the placement engine found clusters.
	ConditionScheduled = "Scheduled"
	// ReasonScheduled (True): the engine placed every replica.
	ReasonScheduled = "Scheduled"
	// ReasonNoPolicy (False): no PropagationPolicy or ClusterPropagationPolicy selects the database.
	ReasonNoPolicy = "NoPolicy"
	// ReasonUnschedulable (False): no placement fits; the current one (if any) is kept.
	ReasonUnschedulable = "Unschedulable"
	// ReasonInvalidPlacement (False): the policy's placement cannot be evaluated.
	ReasonInvalidPlacement = "InvalidPlacement"
	// ReasonReservedNamespace (False): the DatabaseCluster lives in a namespace that may hold no
	// database (ReservedHubNamespace); nothing is placed and no credentials are made. Also the
	// reason of CredentialsReady, and of a MemberDatabase's Ready when the agent refuses its share.
	ReasonReservedNamespace = "ReservedNamespace"
)

const (
	// ConditionPropagated says whether every chosen cluster has its MemberDatabase up to date.
	ConditionPropagated = "Propagated"
	// ReasonAllPropagated (True): every placed cluster's MemberDatabase is written.
	ReasonAllPropagated = "AllPropagated"
	// ReasonPropagationFailed (False): some MemberDatabase could not be written.
	ReasonPropagationFailed = "PropagationFailed"
	// ReasonNotScheduled (False) of Propagated and Available: nothing is placed yet.
	ReasonNotScheduled = "NotScheduled"
)

const (
	// ConditionAvailable says whether the database serves: the primary is ready and enough replicas are.
	ConditionAvailable = "Available"
	// ReasonPrimaryReady (True): the primary is ready and a majority of spec.replicas is.
	ReasonPrimaryReady = "PrimaryReady"
	// ReasonPrimaryNotReady (False): the primary's share reports no ready primary at the current epoch.
	ReasonPrimaryNotReady = "PrimaryNotReady"
	// ReasonPrimaryClusterUnknown (Unknown): the agent of the primary's cluster is silent.
	ReasonPrimaryClusterUnknown = "PrimaryClusterUnknown"
	// ReasonTooFewReplicasReady (False): fewer than a majority of spec.replicas are ready.
	ReasonTooFewReplicasReady = "TooFewReplicasReady"
)

const (
	// ConditionProgressing says whether a change is still rolling out.
	ConditionProgressing = "Progressing"
	// ReasonRollingOut (True): some share is pending or not yet at its desired spec and readiness.
	// The agent gives a MemberDatabase's Progressing the same reason.
	ReasonRollingOut = "RollingOut"
	// ReasonEvictingShares (True): evicted shares are kept until they may be purged.
	ReasonEvictingShares = "EvictingShares"
	// ReasonWaitingForMemberCleanup (True): deletion waits for clusters to remove their shares.
	ReasonWaitingForMemberCleanup = "WaitingForMemberCleanup"
	// ReasonRollingVersion (True): a change of spec.version goes from share to share: the
	// standbys' shares one at a time, then a switchover to a share on the new version, then the
	// former primary's share. The message names the step.
	ReasonRollingVersion = "RollingVersion"
	// ReasonUpToDate (False): every share is up to date. The agent gives a MemberDatabase's
	// Progressing the same reason.
	ReasonUpToDate = "UpToDate"
)

const (
	// ConditionDegraded says whether some share is unhealthy; the reason names the clusters.
	ConditionDegraded = "Degraded"
	// ReasonSharesUnknown (True): some cluster's agent is silent.
	ReasonSharesUnknown = "SharesUnknown"
	// ReasonSharesDegraded (True): some share reports Degraded or Fenced.
	ReasonSharesDegraded = "SharesDegraded"
	// ReasonHealthy (False): no share is degraded.
	ReasonHealthy = "Healthy"
)

const (
	// ConditionPrimaryFailsafe says whether the primary takes writes on its failsafe: its Lease
	// can no longer be renewed (the hub, its agent or the link between them is down) and it goes
	// on because it hears every standby of its membership. Nothing is wrong with the data; the
	// control plane is.
	ConditionPrimaryFailsafe = "PrimaryFailsafe"
	// ReasonFailsafe (True): the primary's instance reports it takes writes on its failsafe.
	ReasonFailsafe = "Failsafe"
	// ReasonLeaseHeld (False): the primary takes writes under its Lease, or reports nothing of
	// a failsafe.
	ReasonLeaseHeld = "LeaseHeld"
)

const (
	// ConditionFailoverInProgress says whether the primary is moving to another cluster.
	ConditionFailoverInProgress = "FailoverInProgress"
	// ReasonNoFailover (False): the primary is not moving.
	ReasonNoFailover = "NoFailover"
	// ReasonWaitingForEviction (True): the primary's cluster is not Ready, but its share's taint is
	// still tolerated: the primary moves with the eviction.
	ReasonWaitingForEviction = "WaitingForEviction"
	// ReasonWaitingForFencing (True): a failover waits until the old primary's agent has certainly
	// fenced itself (no renewal seen for its fenceAfter plus the hub's margin).
	ReasonWaitingForFencing = "WaitingForFencing"
	// ReasonManualFailoverRequired (True): the primary's cluster is lost and spec.primary.failover
	// is Manual: the hub waits for the user.
	ReasonManualFailoverRequired = "ManualFailoverRequired"
	// ReasonDemoting (True): a planned move waits for the old primary to step down.
	ReasonDemoting = "Demoting"
	// ReasonEvictionRateLimited (True): the primary's move waits for the hub-wide eviction rate
	// limit to let its shares go.
	ReasonEvictionRateLimited = "EvictionRateLimited"
	// ReasonEvictionsPaused (True): so many of the database's clusters are not Ready at once (or
	// were, until a grace period ago) that the hub pauses its evictions for failure, the
	// primary's move included (--unhealthy-cluster-threshold).
	ReasonEvictionsPaused = "EvictionsPaused"
	// ReasonClusterReturning (True): the primary's cluster is Ready again but still carries its
	// NoExecute health taint; the move the taint called for waits for it to be lifted (and is
	// then dropped) rather than demote the primary.
	ReasonClusterReturning = "ClusterReturning"
	// ReasonPromoted (True): a new primary was promoted and is not ready yet.
	ReasonPromoted = "Promoted"
	// ReasonFailoverComplete (False): the new primary is ready.
	ReasonFailoverComplete = "FailoverComplete"
	// ReasonFailoverCanceled (False): a move the hub was waiting to make is no longer called for
	// (the primary's cluster came back, say): the primary stays.
	ReasonFailoverCanceled = "FailoverCanceled"
	// ReasonWaitingForSynchronousStandby (True): the primary's cluster is lost, durability is
	// required, and no standby that can be promoted is known to have every acknowledged commit
	// (too few of status.synchronous.standbys can be read for the quorum, or the most advanced is
	// not one the hub can promote): the hub waits rather than lose acknowledged writes.
	ReasonWaitingForSynchronousStandby = "WaitingForSynchronousStandby"
	// ReasonWaitingForSilence (True): the primary's cluster is lost and the standby to promote
	// has exchanged WAL with a primary too recently, or is not one the old primary answers to:
	// the old primary may still take writes while it hears its standbys (its failsafe), so the
	// hub promotes only a member of its membership silent for longer than that can last.
	ReasonWaitingForSilence = "WaitingForSilence"
	// ReasonSwitchoverPending (False): the first of spec.primary.preferredClusters cannot take the
	// primary yet (it holds no replica, or is not healthy); the switchover happens once it can.
	ReasonSwitchoverPending = "SwitchoverPending"
)

const (
	// ConditionCredentialsReady says whether a postgres database's credentials Secrets exist and
	// hold the keys they must.
	ConditionCredentialsReady = "CredentialsReady"
	// CredentialsReasonReady (True): every credentials Secret exists, the user's or the hub's,
	// and holds its keys.
	CredentialsReasonReady = "SecretsReady"
	// CredentialsReasonSecretMalformed (False): a credentials Secret lacks a key; the message
	// names the Secret and the key. The hub never overwrites it: the user fixes it.
	CredentialsReasonSecretMalformed = "SecretMalformed"
	// CredentialsReasonSecretFailed (False): the hub could not read or create a credentials Secret.
	CredentialsReasonSecretFailed = "SecretFailed"
)

// DatabaseCluster is a database whose replicas the hub places across member clusters.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 52 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label of at most 52 characters: it names the StatefulSet and pods in every member cluster"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dbc,categories=dbfleet
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Primary",type=string,JSONPath=`.status.primary.cluster`
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.status.clusters`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.status.endpoints.readWrite`
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=`.spec.engine`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.spec.version`,priority=1
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.status.primary.epoch`,priority=1
// +kubebuilder:printcolumn:name="Primary Pod",type=string,JSONPath=`.status.primary.pod`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DatabaseCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec DatabaseClusterSpec `json:"spec"`
	// +optional
	Status DatabaseClusterStatus `json:"status,omitempty"`
}

// DatabaseClusterList is a list of DatabaseClusters.
// +kubebuilder:object:root=true
type DatabaseClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DatabaseCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DatabaseCluster{}, &DatabaseClusterList{})
}

// SynchronousStatus is the quorum of one primary epoch: every commit the primary acknowledged
// at Epoch is on at least Number of Standbys. So once more than len(Standbys) - Number of them
// can be read, the most advanced of those has every acknowledged commit (R + W > N).
type SynchronousStatus struct {
	// Epoch is the primary epoch this describes; a new primary starts a new quorum.
	// +kubebuilder:validation:Minimum=1
	Epoch int64 `json:"epoch"`
	// Number is the fewest standbys a commit waited for at this epoch (W), as the primary last
	// reported it in effect (or as asked, before it reported).
	// +kubebuilder:validation:Minimum=0
	Number int32 `json:"number"`
	// Standbys are every standby that may have confirmed a commit at this epoch (N): those the
	// primary listed in synchronous_standby_names, and those the hub has asked it to list. A name
	// leaves only when it is in none of them any more.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	Standbys []string `json:"standbys,omitempty"`
	// Synchronous are the standbys that confirmed commits at the primary's last report
	// (pg_stat_replication.sync_state sync or quorum).
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	// +optional
	Synchronous []string `json:"synchronous,omitempty"`
	// Durability is spec.postgres.synchronous.dataDurability when this was recorded.
	// +optional
	Durability DataDurability `json:"durability,omitempty"`
}

// DatabaseEndpoints are host:port addresses of a database's instances.
type DatabaseEndpoints struct {
	// ReadWrite is the primary's address (host:port); empty while no primary runs or while its
	// address is not known yet (a LoadBalancer waiting for one, say).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ReadWrite string `json:"readWrite,omitempty"`
	// ReadOnly are the standbys' addresses (host:port), sorted.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	ReadOnly []string `json:"readOnly,omitempty"`
}
