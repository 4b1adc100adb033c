package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Engine is the database engine a DatabaseCluster runs.
// +kubebuilder:validation:Enum=postgres;mysql;custom
type Engine string

const (
	EnginePostgres Engine = "postgres"
	// EngineMySQL stays in the enum, so that a mysql database meets our refusal rather than
	// "Unsupported value", but admission refuses it (the rule on DatabaseTemplate.Engine) until
	// dbfleet has a MySQL data plane: nothing would replicate it, promote it or fence its writes.
	// The rule sits on the template, so a MemberDatabase refuses it too: the hub writes one only
	// from a DatabaseCluster, and an agent has no MySQL data plane either. CRD validation
	// ratcheting lets an object stored before the rule be updated as long as its engine stays.
	EngineMySQL Engine = "mysql"
	// EngineCustom runs the image the user names; dbfleet knows nothing of its protocol and
	// fences nothing.
	EngineCustom Engine = "custom"
)

// DatabaseTemplate is what a member cluster needs to run its share of a database. DatabaseCluster
// embeds it, and every MemberDatabase carries a copy.
// +kubebuilder:validation:XValidation:rule="self.engine != 'custom' || (has(self.image) && self.image.size() > 0)",message="image is required when engine is custom",fieldPath=".image",reason="FieldValueRequired"
// +kubebuilder:validation:XValidation:rule="self.engine != 'postgres' || oldSelf.engine != 'postgres' || self.version.split('.')[0] == oldSelf.version.split('.')[0]",messageExpression="'the postgres major version cannot change (' + oldSelf.version + ' to ' + self.version + '): major upgrades (pg_upgrade) are not supported yet; minor versions of ' + oldSelf.version.split('.')[0] + ' may change'",fieldPath=".version"
// +kubebuilder:validation:XValidation:rule="!has(self.postgres) || self.engine == 'postgres'",message="postgres settings apply only to engine postgres",fieldPath=".postgres",reason="FieldValueForbidden"
// +kubebuilder:validation:XValidation:rule="(has(self.postgres) && has(self.postgres.uid) ? self.postgres.uid : 999) == (has(oldSelf.postgres) && has(oldSelf.postgres.uid) ? oldSelf.postgres.uid : 999)",message="postgres.uid is immutable: the data directories belong to it",fieldPath=".postgres"
// +kubebuilder:validation:XValidation:rule="(has(self.postgres) && has(self.postgres.gid) ? self.postgres.gid : 999) == (has(oldSelf.postgres) && has(oldSelf.postgres.gid) ? oldSelf.postgres.gid : 999)",message="postgres.gid is immutable: the data directories belong to it",fieldPath=".postgres"
type DatabaseTemplate struct {
	// Engine is the database engine: postgres, or custom (dbfleet runs your image, knows nothing
	// of its protocol, fences nothing). mysql is refused until dbfleet has a MySQL data plane.
	// It cannot change after creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="engine is immutable"
	// +kubebuilder:validation:XValidation:rule="self != 'mysql'",message="engine mysql is not supported yet: dbfleet has no MySQL data plane (replication, fencing); use postgres, or custom to run your own image",reason="FieldValueForbidden"
	// +required
	Engine Engine `json:"engine"`

	// Version is the engine version, for example "16.4"; it picks the image tag unless image is set.
	// For postgres, the major version (before the first dot) cannot change: major upgrades are
	// not supported yet.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Version string `json:"version"`

	// Image overrides the image chosen from engine and version. Required when engine is custom.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Storage is the persistent volume each replica gets.
	// +required
	Storage StorageSpec `json:"storage"`

	// Resources are the compute resources of each database container. Their requests decide how
	// many replicas a member cluster can still take.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// Template overrides parts of the database pods.
	// +optional
	Template *PodTemplateOverrides `json:"template,omitempty"`

	// ServiceAccountTemplate gives the ServiceAccount dbfleet creates for the database's pods in
	// each member cluster (<db>-instance) labels and annotations, for a cloud's workload identity
	// say (CloudNativePG's field of the same name).
	// +optional
	ServiceAccountTemplate *ServiceAccountTemplate `json:"serviceAccountTemplate,omitempty"`

	// Postgres holds settings only engine postgres has.
	// +optional
	Postgres *PostgresSpec `json:"postgres,omitempty"`
}

// PostgresSpec holds a postgres database's own settings.
type PostgresSpec struct {
	// Synchronous makes the primary wait, before it acknowledges a commit, for standbys in other
	// clusters to have it on disk. Unset: asynchronous replication.
	// +optional
	Synchronous *SynchronousReplication `json:"synchronous,omitempty"`

	// UID is the user the postgres pods run as: never root (the pods pass the restricted Pod
	// Security Standard). The image must know it, since initdb looks its name up; 999 is the
	// postgres user of the official Debian-based images (their Alpine images use 70). It owns
	// the data directories, so it never changes.
	// +kubebuilder:validation:Minimum=1
	// +optional
	UID *int64 `json:"uid,omitempty"`

	// GID is the group of the postgres pods and of their volumes (fsGroup); 999 by default.
	// +kubebuilder:validation:Minimum=1
	// +optional
	GID *int64 `json:"gid,omitempty"`
}

// DefaultPostgresID is the user and group postgres pods run as unless spec.postgres names
// others: the postgres user of the official Debian-based postgres images.
const DefaultPostgresID = 999

// DataDurability says what a primary does when too few synchronous standbys stream.
// +kubebuilder:validation:Enum=required;preferred
type DataDurability string

const (
	// DataDurabilityRequired: commits wait until number standbys in other clusters have them, even
	// when that means they wait for good; and after losing the primary the hub promotes only a
	// standby that was synchronous, when the quorum says it has every acknowledged commit.
	DataDurabilityRequired DataDurability = "required"
	// DataDurabilityPreferred: while fewer than number of those standbys stream, the primary waits
	// for those that do (none: asynchronous), so writes go on; a failover then may lose the
	// commits only the primary had.
	DataDurabilityPreferred DataDurability = "preferred"
)

// SynchronousReplication counts standbys in clusters other than the primary's:
// synchronous_standby_names = 'ANY <number> (<their pods>)'. Standbys in the primary's own cluster
// never count, so an acknowledged commit survives the loss of that whole cluster.
type SynchronousReplication struct {
	// Number is how many standbys in other clusters must have a commit before it is acknowledged.
	// It should be below the number of replicas outside the primary's cluster (the admission check
	// cannot know the placement): with required, a commit waits for good while fewer stream, and
	// the primary says so in its status.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +required
	Number int32 `json:"number"`

	// DataDurability is required (default: commits wait for number standbys, whatever happens)
	// or preferred (commits wait only for the standbys that stream).
	// +kubebuilder:default=required
	// +optional
	DataDurability DataDurability `json:"dataDurability,omitempty"`
}

// StorageSpec describes the volume of each replica.
// +kubebuilder:validation:XValidation:rule="has(self.storageClassName) == has(oldSelf.storageClassName)",message="storageClassName is immutable",fieldPath=".storageClassName"
type StorageSpec struct {
	// Size of each replica's volume, a quantity such as "10Gi". It may grow but never shrink.
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || quantity(string(self)).isGreaterThan(quantity('0'))",message="size must be greater than zero"
	// +kubebuilder:validation:XValidation:rule="!isQuantity(string(self)) || !isQuantity(string(oldSelf)) || quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="size cannot shrink"
	// +required
	Size resource.Quantity `json:"size"`

	// StorageClassName is the StorageClass of the volumes; empty means the member's default.
	// It cannot change after creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="storageClassName is immutable"
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`

	// RetentionPolicy says what happens to volumes when the database or a share goes away.
	// Both cases default to Retain: dbfleet never deletes data unless told to.
	// +kubebuilder:default={}
	// +optional
	RetentionPolicy PVCRetentionPolicy `json:"retentionPolicy,omitempty"`
}

// PVCRetentionPolicyType is what to do with a volume whose replica is gone.
// +kubebuilder:validation:Enum=Retain;Delete
type PVCRetentionPolicyType string

const (
	RetainPVC PVCRetentionPolicyType = "Retain"
	DeletePVC PVCRetentionPolicyType = "Delete"
)

// PVCRetentionPolicy mirrors the StatefulSet persistentVolumeClaimRetentionPolicy.
type PVCRetentionPolicy struct {
	// WhenDeleted applies when the DatabaseCluster or a cluster's whole share is deleted.
	// +kubebuilder:default=Retain
	// +optional
	WhenDeleted PVCRetentionPolicyType `json:"whenDeleted,omitempty"`

	// WhenScaled applies when a share shrinks.
	// +kubebuilder:default=Retain
	// +optional
	WhenScaled PVCRetentionPolicyType `json:"whenScaled,omitempty"`
}

// ServiceAccountTemplate is what a user may set on a database's ServiceAccount.
type ServiceAccountTemplate struct {
	// Metadata are the labels and annotations added to the ServiceAccount.
	Metadata ServiceAccountMetadata `json:"metadata"`
}

// ServiceAccountMetadata are the labels and annotations of a database's ServiceAccount.
type ServiceAccountMetadata struct {
	// Labels are added to the ServiceAccount. Keys under dbfleet.io/ are reserved.
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('dbfleet.io/'))",message="labels under dbfleet.io/ are reserved"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to the ServiceAccount.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// PodTemplateOverrides are the parts of the database pods a user may set. dbfleet owns the rest
// (containers, volumes, labels it relies on).
type PodTemplateOverrides struct {
	// Labels are added to every pod. Keys under dbfleet.io/ are reserved.
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('dbfleet.io/'))",message="labels under dbfleet.io/ are reserved"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations are added to every pod.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// NodeSelector constrains pods to nodes with these labels.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations let pods schedule onto tainted nodes.
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity is the pods' scheduling affinity.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// PriorityClassName is the pods' priority class.
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ServiceAccountName is refused: a database's pods run as the ServiceAccount dbfleet creates
	// for them (<db>-instance), never as an account that already exists in a member cluster, whose
	// rights the database's author may not hold. Set spec.serviceAccountTemplate for its labels
	// and annotations.
	// +kubebuilder:validation:XValidation:rule="false",message="spec.template.serviceAccountName is not accepted: the pods run as the ServiceAccount dbfleet creates (<db>-instance); give it labels and annotations with spec.serviceAccountTemplate"
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// Env is added to the database container's environment.
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// Args replace the database container's arguments.
	// +optional
	Args []string `json:"args,omitempty"`
}
