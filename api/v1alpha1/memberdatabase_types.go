package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DatabaseReference points from a MemberDatabase to its DatabaseCluster on the hub.
type DatabaseReference struct {
	// Namespace of the DatabaseCluster; the agent creates the share's objects in the namespace of
	// the same name in its member cluster.
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// Name of the DatabaseCluster.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// UID of the DatabaseCluster, so a recreated database is never mistaken for the old one.
	// +optional
	UID types.UID `json:"uid,omitempty"`
}

// MemberOrdinals positions a share in the fleet-wide ordinal space.
type MemberOrdinals struct {
	// Start is the StatefulSet spec.ordinals.start of the share.
	// +kubebuilder:validation:Minimum=0
	Start int32 `json:"start"`
}

// MemberDatabaseSpec is one cluster's share of a DatabaseCluster, written by the hub.
// +kubebuilder:validation:XValidation:rule="!has(self.primaryOrdinal) || (self.primaryOrdinal >= self.ordinals.start && self.primaryOrdinal < self.ordinals.start + self.replicas)",message="primaryOrdinal must be one of the share's ordinals (ordinals.start to ordinals.start + replicas - 1)"
// +kubebuilder:validation:XValidation:rule="!has(self.primaryOrdinal) || self.role == 'primary'",message="only a primary share names a primaryOrdinal"
type MemberDatabaseSpec struct {
	// DatabaseRef names the DatabaseCluster on the hub. It cannot change.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="databaseRef is immutable"
	// +required
	DatabaseRef DatabaseReference `json:"databaseRef"`

	// Database is the snapshot of the DatabaseCluster spec the agent needs.
	// +required
	Database DatabaseTemplate `json:"database"`

	// Replicas this cluster runs. Zero while a share drains.
	// +kubebuilder:validation:Minimum=0
	// +required
	Replicas int32 `json:"replicas"`

	// Ordinals position the share's pods in the fleet.
	// +required
	Ordinals MemberOrdinals `json:"ordinals"`

	// Role of the share: primary (the pod at primaryOrdinal is the primary) or replica.
	// +required
	Role ReplicaRole `json:"role"`

	// PrimaryOrdinal is, in a primary share, the ordinal of the pod that is the primary: the
	// hub picks the share's instance furthest in the WAL when it promotes the share, and keeps
	// it for the epoch. Absent: the share's lowest ordinal (ordinals.start).
	// +kubebuilder:validation:Minimum=0
	// +optional
	PrimaryOrdinal *int32 `json:"primaryOrdinal,omitempty"`

	// Epoch is the primary epoch this share belongs to; agents ignore anything older than what
	// they have seen.
	// +kubebuilder:validation:Minimum=1
	// +required
	Epoch int64 `json:"epoch"`

	// Network is the member cluster's spec.databaseNetwork, copied by the hub: how the share
	// exposes its primary to other clusters. Empty means PodIP.
	// +optional
	Network DatabaseNetwork `json:"network,omitempty"`

	// PrimaryEndpoint is the current primary's address (host:port) as the primary's cluster
	// exposes it, written by the hub into every share: standbys outside the primary's cluster
	// follow and clone from it. Empty while it is not known.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	PrimaryEndpoint string `json:"primaryEndpoint,omitempty"`

	// Standbys are the pods of the other clusters' shares (<db>-<ordinal>), written by the hub
	// into the primary's share: its primary keeps a replication slot for each.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Standbys []string `json:"standbys,omitempty"`

	// PromoteAfterLSN is the promotion token of a planned switchover, written by the hub into the
	// new primary's share with its role and epoch: the old primary's final LSN (its shutdown
	// checkpoint, pg_controldata "Latest checkpoint location"). The primary pod's instance stays a
	// standby until it has replayed past it, then promotes, so no commit of the old primary is
	// lost. Empty after a failover, where no final LSN is known.
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$`
	// +optional
	PromoteAfterLSN string `json:"promoteAfterLSN,omitempty"`
}

// MemberDatabaseStatus is what the agent reports about its share.
type MemberDatabaseStatus struct {
	// ObservedGeneration is the spec generation the agent last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas the member's StatefulSet has.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas of the member's StatefulSet.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Epoch the agent acted on last.
	// +optional
	Epoch int64 `json:"epoch,omitempty"`
	// Version is the engine version the share really runs: the agent sets it to
	// spec.database.version once every wanted pod runs the StatefulSet's current template, of
	// that version's image, and is ready, and keeps the previous value until then. The hub rolls
	// a version change across the shares by it (standbys first, the primary's share last).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Version string `json:"version,omitempty"`
	// Instances are what each postgres pod's instance manager reports of itself (its /status),
	// read by the agent; empty without the instance manager.
	// +listType=map
	// +listMapKey=pod
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Instances []InstanceStatus `json:"instances,omitempty"`
	// Endpoints are the share's instances' addresses as other clusters reach them (spec.network):
	// readWrite when the share runs the primary, readOnly its standbys.
	// +optional
	Endpoints *DatabaseEndpoints `json:"endpoints,omitempty"`
	// Conditions: Applied, Available, Progressing, Degraded, Fenced.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// InstanceRole is the role an instance manager really runs.
// +kubebuilder:validation:Enum=primary;standby;stopped;fenced;unknown
type InstanceRole string

const (
	InstanceRunningPrimary InstanceRole = "primary"
	InstanceRunningStandby InstanceRole = "standby"
	InstanceStopped        InstanceRole = "stopped"
	InstanceFenced         InstanceRole = "fenced"
	// InstanceUnknown: the agent could not read the instance's /status; Message says why.
	InstanceUnknown InstanceRole = "unknown"
)

// InstanceStatus is one pod's instance, as its /status says.
type InstanceStatus struct {
	// Pod is the pod's name.
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod"`
	// Role the instance really runs.
	Role InstanceRole `json:"role"`
	// Epoch is the epoch the instance acts on: its pod's, once accepted. An instance never acts
	// on a lower one again.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Epoch int64 `json:"epoch,omitempty"`
	// PromotedEpoch is the epoch at which its data directory was last initialised or promoted.
	// A switchover's target that acts on a later epoch without having been promoted at the one
	// it was handed took no write there.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PromotedEpoch int64 `json:"promotedEpoch,omitempty"`
	// Address is host:port of the pod's postgres by its pod IP, as the agent reads it off the
	// Pod. In the PodIP network mode the hub points the other clusters' standbys at a newly
	// promoted primary by it as soon as it promotes, without waiting for the share to report its
	// read-write endpoint (they stream from it, cascading, until it runs as primary).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Address string `json:"address,omitempty"`
	// Timeline of its postgres.
	// +optional
	Timeline int64 `json:"timeline,omitempty"`
	// ReceivedLSN is the last WAL position a standby received (the primary's current one on the
	// primary), as postgres prints it (e.g. 0/3000060).
	// +kubebuilder:validation:MaxLength=32
	// +optional
	ReceivedLSN string `json:"receivedLSN,omitempty"`
	// ReplayedLSN is the last WAL position a standby replayed.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	ReplayedLSN string `json:"replayedLSN,omitempty"`
	// LagBytes is how far a standby's replay is behind what it received from the primary.
	// +optional
	LagBytes int64 `json:"lagBytes,omitempty"`
	// Ready says the instance passes its readiness check: a primary accepts writes, a standby
	// streams.
	Ready bool `json:"ready"`
	// Synchronous is, on the primary, its synchronous replication as it runs it.
	// +optional
	Synchronous *InstanceSynchronous `json:"synchronous,omitempty"`
	// Replication is, on the primary, every standby its pg_stat_replication shows.
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Replication []StandbyReplication `json:"replication,omitempty"`
	// Rejoin is how a former primary last came back as a standby: pg_rewind, or a fresh clone
	// with its old data kept aside.
	// +optional
	Rejoin *InstanceRejoin `json:"rejoin,omitempty"`
	// Diverged are the data directories kept on the instance's volume because pg_rewind could
	// not make them follow the new primary (<volume>/pgdata.diverged-<epoch>); never deleted.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +optional
	Diverged []string `json:"diverged,omitempty"`
	// Demoted is where a former primary's WAL ended when it last stopped as primary: the demotion
	// token a planned switchover hands to the new primary (spec.promoteAfterLSN of its share).
	// +optional
	Demoted *InstanceDemotion `json:"demoted,omitempty"`
	// Failsafe is, on the primary, the standbys it must hear from to go on taking writes when
	// its primary Lease can no longer be renewed (its membership), and those it has not heard
	// within the failsafe window. A failover promotes only a member of it.
	// +optional
	Failsafe *InstanceFailsafe `json:"failsafe,omitempty"`
	// PrimarySilenceSeconds is, on a standby, how long in whole seconds it has exchanged nothing
	// with any primary (0 while its walreceiver is connected). A failover promotes only a
	// standby silent for longer than the old primary's failsafe can last.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PrimarySilenceSeconds *int64 `json:"primarySilenceSeconds,omitempty"`
	// Message says why the status could not be read, when Role is unknown.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// InstanceSynchronous is a primary's synchronous replication (spec.postgres.synchronous).
type InstanceSynchronous struct {
	// Durability is required or preferred.
	// +optional
	Durability DataDurability `json:"durability,omitempty"`
	// Wanted is spec.postgres.synchronous.number.
	// +optional
	Wanted int32 `json:"wanted,omitempty"`
	// Number is how many standbys a commit waits for now: wanted, or fewer with preferred while
	// fewer stream (0: asynchronous).
	// +optional
	Number int32 `json:"number"`
	// StandbyNames is synchronous_standby_names in effect.
	// +kubebuilder:validation:MaxLength=300000
	// +optional
	StandbyNames string `json:"standbyNames,omitempty"`
	// Standbys are the standbys it may wait for: the pods of the other clusters' shares.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Standbys []string `json:"standbys,omitempty"`
	// Synchronous are those that confirm commits now (sync_state sync or quorum).
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Synchronous []string `json:"synchronous,omitempty"`
	// Waiting: durability is required and fewer than wanted standbys stream, so commits do not
	// return until more do.
	// +optional
	Waiting bool `json:"waiting,omitempty"`
	// Degraded: durability is preferred and fewer than wanted standbys stream, so commits wait
	// for fewer (Number).
	// +optional
	Degraded bool `json:"degraded,omitempty"`
}

// InstanceRejoin is a former primary's return as a standby.
type InstanceRejoin struct {
	// Epoch is the epoch whose primary it rejoined.
	Epoch int64 `json:"epoch"`
	// Method is Rewound (pg_rewind undid what only it had), NoRewindNeeded, or Recloned (pg_rewind
	// failed: its data was kept in divergedData and it cloned the new primary).
	// +kubebuilder:validation:Enum=Rewound;NoRewindNeeded;Recloned
	Method string `json:"method"`
	// DivergedData is where its old data directory was kept (Recloned).
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	DivergedData string `json:"divergedData,omitempty"`
	// Message is what pg_rewind said.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// InstanceFailsafe is whom a primary must hear from (docs/failover.md, "Failsafe and promotion
// from silence").
type InstanceFailsafe struct {
	// Active says the primary's Lease can no longer be renewed and it takes writes on the
	// failsafe: it hears every member.
	// +optional
	Active bool `json:"active,omitempty"`
	// Members are the standbys of its membership: the database's other pods, as the hub last
	// gave them to it.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Members []string `json:"members,omitempty"`
	// Unheard are the members it has not heard from within the failsafe window.
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=253
	// +optional
	Unheard []string `json:"unheard,omitempty"`
}

// InstanceDemotion is how an instance last stopped as primary.
type InstanceDemotion struct {
	// Epoch is the epoch at which it was primary.
	Epoch int64 `json:"epoch"`
	// FinalLSN is the location of its shutdown checkpoint (pg_controldata "Latest checkpoint
	// location"), the last WAL it wrote; empty when postgres did not stop cleanly (an immediate
	// shutdown), and then the end of its WAL is not known.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	FinalLSN string `json:"finalLSN,omitempty"`
	// Timeline of that checkpoint.
	// +optional
	Timeline int64 `json:"timeline,omitempty"`
	// Message says why there is no final LSN.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// StandbyReplication is one standby as the primary's pg_stat_replication shows it.
type StandbyReplication struct {
	// Pod is its application_name (its pod name).
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod"`
	// State is startup, catchup, streaming, backup or stopping.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	State string `json:"state,omitempty"`
	// SyncState is async, potential, sync or quorum.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	SyncState string `json:"syncState,omitempty"`
	// FlushLSN is the last WAL position the standby has on disk, as the primary knows it.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	FlushLSN string `json:"flushLSN,omitempty"`
}

// The conditions of a MemberDatabase, each with the reasons its agent gives it (pkg/agent/member).
// Available, Progressing and Degraded share their types, and Progressing its reasons, with
// DatabaseCluster.
const (
	// ConditionApplied says whether the agent applied the share to its member cluster.
	ConditionApplied = "Applied"
	// ReasonApplied (True): the share's StatefulSet is applied at the spec's epoch.
	ReasonApplied = "Applied"
	// ReasonApplyFailed (False, and Degraded True): an object could not be applied; the message
	// says why.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonNotManagedByAgent (False, and Degraded True): an object of the share's name exists in
	// the member cluster and is not the agent's.
	ReasonNotManagedByAgent = "NotManagedByAgent"
	// ReasonStaleEpoch (False): the spec's epoch is lower than the one the member already runs,
	// so it is not acted on.
	ReasonStaleEpoch = "StaleEpoch"
	// ReasonStorageNotExpandable (False): the share's storage grew, but the StorageClass of its
	// volumes does not allow expansion; they and the claim template keep their size.
	ReasonStorageNotExpandable = "StorageNotExpandable"
	// ReasonStorageSizeKept (False): the volumes keep a size other than the share asks for, for
	// another reason the message gives (they never shrink; a fenced share's StatefulSet is not
	// replaced).
	ReasonStorageSizeKept = "StorageSizeKept"
	// ReasonReplacingStatefulSet (True): the StatefulSet is being replaced, its pods and volumes
	// kept, so that its claim template asks for the share's grown storage.
	ReasonReplacingStatefulSet = "ReplacingStatefulSet"
)

// Reasons of a MemberDatabase's Available, Progressing and Degraded conditions.
const (
	// ReasonAllReplicasReady (Available True): every replica of the share is ready and current.
	ReasonAllReplicasReady = "AllReplicasReady"
	// ReasonReplicasNotReady (Available False): some replica of the share is not ready or current.
	ReasonReplicasNotReady = "ReplicasNotReady"
	// ReasonStatefulSetUnknown (Available and Progressing Unknown): the StatefulSet is not applied.
	ReasonStatefulSetUnknown = "StatefulSetUnknown"
	// ReasonInstancesNotReady (Available False): the pods are ready, but the instance managers do
	// not report a primary that takes writes and standbys that all stream; the message says which.
	ReasonInstancesNotReady = "InstancesNotReady"
	// ReasonImagePullFailed (Degraded True, Available False): a container of the share's pods
	// cannot get its image, for example a version for which the member has no image; the
	// message names the pod, the container and the image.
	ReasonImagePullFailed = "ImagePullFailed"
	// ReasonAsExpected (Degraded False): the share is applied as asked.
	ReasonAsExpected = "AsExpected"
)

const (
	// ConditionFenced says whether the agent fenced its primary because it lost the hub.
	ConditionFenced = "Fenced"
	// ReasonHubLeaseExpired (True): the agent had no successful hub renewal within fenceAfter; the
	// share stays fenced until the hub hands out a higher epoch.
	ReasonHubLeaseExpired = "HubLeaseExpired"
	// ReasonInstanceFenced (True): the share's primary instance stopped taking writes at the
	// share's epoch by its own judgement of the primary Lease (it saw no renewal in time), while
	// the agent kept its hub lease; it stays fenced until the hub hands out a higher epoch.
	ReasonInstanceFenced = "InstanceFenced"
	// ReasonPrimaryLeaseLapsed (True): the agent cannot reach its member API server, so it could
	// not renew the share's primary Lease, and the last renewal it tried (or, for an agent that
	// started since, the latest one any earlier agent could have written) has expired by more than
	// the instances' clock skew allowance: the primary instance has stopped taking writes. The
	// share stays fenced until the hub hands out a higher epoch, and the hub may promote
	// elsewhere at once, though the agent still heartbeats.
	ReasonPrimaryLeaseLapsed = "PrimaryLeaseLapsed"
	// ReasonPrimaryLost (True): the share's primary instance stopped serving (its /status
	// unread, or not a ready primary) for the agent's --primary-lost-after while the agent was
	// healthy, so the agent stopped renewing the primary Lease, waited until it had certainly run
	// out, and fenced the share at its epoch. The hub promotes the most advanced eligible standby,
	// in this cluster or another (docs/failover.md, "A lost primary pod").
	ReasonPrimaryLost = "PrimaryLost"
	// ReasonNotFenced (False): the share's primary is not fenced.
	ReasonNotFenced = "NotFenced"
)

const (
	// ConditionClockSkew says whether the clocks of the share's instances disagree with the
	// agent's by more than maxClockSkew (1 s), as the agent measures them when it reads their
	// /status. An instance refuses a primary Lease renewed more than that in its future, so
	// while they disagree the hub keeps the database's primary off this cluster (a primary
	// there moves away by a planned switchover); its standbys stay.
	ConditionClockSkew = "ClockSkew"
	// ReasonClocksDisagree (True): an instance's clock is certainly further than 1 s from the
	// agent's; the message names it and the offset.
	ReasonClocksDisagree = "ClocksDisagree"
	// ReasonClocksAgree (False): every instance read agrees within 1 s.
	ReasonClocksAgree = "ClocksAgree"
)

// MemberDatabase is one cluster's share of one DatabaseCluster. The hub writes it into namespace
// member-<cluster>; that cluster's agent runs it and reports its status.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mdb,categories=dbfleet
// +kubebuilder:printcolumn:name="Database",type=string,JSONPath=`.spec.databaseRef.name`
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=`.spec.role`
// +kubebuilder:printcolumn:name="Epoch",type=integer,JSONPath=`.spec.epoch`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Start",type=integer,JSONPath=`.spec.ordinals.start`,priority=1
// +kubebuilder:printcolumn:name="Primary Ordinal",type=integer,JSONPath=`.spec.primaryOrdinal`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberDatabase struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec MemberDatabaseSpec `json:"spec"`
	// +optional
	Status MemberDatabaseStatus `json:"status,omitempty"`
}

// MemberDatabaseList is a list of MemberDatabases.
// +kubebuilder:object:root=true
type MemberDatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberDatabase `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MemberDatabase{}, &MemberDatabaseList{})
}
