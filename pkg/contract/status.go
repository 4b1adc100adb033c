package contract

// Path is where the instance manager serves Status as JSON; Port is its default HTTP port.
const (
	Path       = "/status"
	HealthPath = "/healthz"
	ReadyPath  = "/readyz"
	Port       = 8000
)

// Role is what postgres really runs as, not what the pod's label asks for.
type Role string

const (
	// RolePrimary: postgres runs, out of recovery, under a valid Lease at the instance's epoch.
	RolePrimary Role = "primary"
	// RoleStandby: postgres runs in recovery, following the primary endpoint.
	RoleStandby Role = "standby"
	// RoleStopped: postgres does not run (waiting for the pod's role, the Lease, a primary to
	// clone from, or refusing to start; Reason says which).
	RoleStopped Role = "stopped"
	// RoleFenced: the instance was primary at Epoch and stopped taking writes; it stays so until
	// it is handed a higher epoch.
	RoleFenced Role = "fenced"
)

// Reason says why the instance is in its role; empty when all is as asked.
type Reason string

const (
	// ReasonFenced: the primary Lease ran out (or was released, or names another holder).
	ReasonFenced Reason = "Fenced"
	// ReasonClockSkew: the Lease's renewTime is more than maxClockSkew in this instance's future,
	// so the Lease is not trusted.
	ReasonClockSkew Reason = "ClockSkew"
	// ReasonSystemIdentifierMismatch: the data directory belongs to another database than the
	// primary's; the instance refuses to start and deletes nothing.
	ReasonSystemIdentifierMismatch Reason = "SystemIdentifierMismatch"
	// ReasonLeaseNotHeld: the pod is the primary pod but the Lease does not name its cluster and
	// epoch (yet), so postgres is not started as primary.
	ReasonLeaseNotHeld Reason = "LeaseNotHeld"
	// ReasonWaitingForPod: the instance has not read its Pod yet, or the Pod lacks a role/epoch.
	ReasonWaitingForPod Reason = "WaitingForPod"
	// ReasonNoPrimaryEndpoint: a standby (or a clone) needs the primary endpoint annotation.
	ReasonNoPrimaryEndpoint Reason = "NoPrimaryEndpoint"
	// ReasonNoData: the pod is primary at an epoch above 1 with an empty data directory; only the
	// first primary (epoch 1) may initialise a database, so it waits.
	ReasonNoData Reason = "NoData"
	// ReasonStaleEpoch: the pod carries an epoch below one this instance has already acted on.
	ReasonStaleEpoch Reason = "StaleEpoch"
	// ReasonBootstrapFailed, ReasonCloneFailed, ReasonStartFailed, ReasonPromoteFailed: the step
	// failed; Message has the error and the instance retries.
	ReasonBootstrapFailed Reason = "BootstrapFailed"
	ReasonCloneFailed     Reason = "CloneFailed"
	ReasonStartFailed     Reason = "StartFailed"
	ReasonPromoteFailed   Reason = "PromoteFailed"
	// ReasonPodRoleFenced: the agent labelled the pod fenced.
	ReasonPodRoleFenced Reason = "PodRoleFenced"
	// ReasonCredentialsInvalid: the mounted Secrets cannot be read (a key missing or empty) or
	// their new passwords not set; the credentials last read stay in use.
	ReasonCredentialsInvalid Reason = "CredentialsInvalid"
	// ReasonVolumeFull: the data volume has less than a WAL segment (16 MiB) free; postgres
	// cannot write until it grows or space is freed.
	ReasonVolumeFull Reason = "VolumeFull"
	// ReasonWaitingForSynchronousStandbys: a primary whose durability is required has fewer
	// synchronous standbys streaming than it needs: commits do not return until more do.
	ReasonWaitingForSynchronousStandbys Reason = "WaitingForSynchronousStandbys"
	// ReasonSynchronousDegraded: a primary whose durability is preferred has fewer synchronous
	// standbys streaming than asked for, and waits for those that do (none: asynchronous).
	ReasonSynchronousDegraded Reason = "SynchronousDegraded"
	// ReasonRejoinFailed: a former primary cannot be rewound yet (its new primary cannot be
	// reached); it retries, and keeps its data.
	ReasonRejoinFailed Reason = "RejoinFailed"
	// ReasonPrimaryUnreachable: a standby does not stream, and its own replication connection to
	// the primary endpoint fails (the message has the error: refused, timed out, password).
	ReasonPrimaryUnreachable Reason = "PrimaryUnreachable"
	// ReasonFailsafe: the primary's Lease can no longer be renewed (the control plane is out of
	// reach) and it goes on taking writes because it hears every standby of its membership.
	ReasonFailsafe Reason = "Failsafe"
	// ReasonWaitingForSilence: the pod is primary at a new epoch without a promotion token (a
	// failover), and the standby has exchanged something with a primary within
	// PromotionSilence: it stops following and promotes once it has been silent that long.
	ReasonWaitingForSilence Reason = "WaitingForSilence"
	// ReasonWaitingForReplay: the pod is primary at a new epoch with a promote-after LSN (a
	// planned switchover's promotion token, the old primary's final LSN), and the standby has not
	// replayed past it: it promotes once it has, and never before (the message has both LSNs).
	ReasonWaitingForReplay Reason = "WaitingForReplay"
)

// Status is the body of GET /status.
type Status struct {
	// Pod is the instance's pod name (also its application_name when streaming).
	Pod string `json:"pod"`
	// Role is what postgres really runs as.
	Role Role `json:"role"`
	// Epoch is the epoch the instance acts on (the pod's, once accepted).
	Epoch int64 `json:"epoch"`
	// PromotedEpoch is the epoch at which this data directory was last bootstrapped or promoted.
	PromotedEpoch int64 `json:"promotedEpoch,omitempty"`
	// Timeline is postgres' current timeline (0 when it does not run).
	Timeline int64 `json:"timeline,omitempty"`
	// ReceivedLSN and ReplayedLSN (standby) or the current WAL LSN in both (primary).
	ReceivedLSN string `json:"receivedLSN,omitempty"`
	ReplayedLSN string `json:"replayedLSN,omitempty"`
	// LagBytes is received minus replayed on a standby; 0 on a primary.
	LagBytes int64 `json:"lagBytes"`
	// Streaming says whether a standby's walreceiver is streaming from the primary.
	Streaming bool `json:"streaming,omitempty"`
	// Ready is what /readyz answers: a primary took a write, or a standby streams.
	Ready bool `json:"ready"`
	// SystemIdentifier is the data directory's database system identifier (decimal).
	SystemIdentifier string `json:"systemIdentifier,omitempty"`
	// LeaseDeadline is the last time (RFC 3339, this instance's clock) until which it may take
	// writes: the Lease's renewTime + leaseDurationSeconds - fenceSafety.
	LeaseDeadline string `json:"leaseDeadline,omitempty"`
	// Restarts counts the times the manager started postgres again in place (after a crash).
	Restarts int `json:"restarts,omitempty"`
	// LeaseRenewTime is the primary Lease's renewTime as last read (RFC 3339; empty when the
	// Lease was never read or is absent): when the API server is out of reach, it stops moving.
	LeaseRenewTime string `json:"leaseRenewTime,omitempty"`
	// Synchronous is, on a primary, its synchronous replication as it runs it.
	Synchronous *Synchronous `json:"synchronous,omitempty"`
	// Replication is, on a primary, every standby its pg_stat_replication shows.
	Replication []Replica `json:"replication,omitempty"`
	// Rejoin is how this instance last came back as a standby after it had been primary.
	Rejoin *Rejoin `json:"rejoin,omitempty"`
	// Diverged are the data directories set aside on the volume (<volume>/pgdata.diverged-<epoch>)
	// because pg_rewind could not make them follow the new primary: kept, never deleted.
	Diverged []string `json:"diverged,omitempty"`
	// Demoted is where this instance's WAL ended when it last stopped as primary.
	Demoted *Demotion `json:"demoted,omitempty"`
	// Failsafe is, on a primary with the failsafe on (the default), whom it must hear from to
	// keep taking writes without its Lease, and whom it has not heard within FailsafeWindow; nil
	// with the failsafe off. No member unheard: should its Lease run out, it goes on.
	Failsafe *Failsafe `json:"failsafe,omitempty"`
	// Archive is, on a primary of a database with a backup repository, its continuous archiving.
	Archive *Archive `json:"archive,omitempty"`
	// PrimarySilenceSeconds is, on a standby (or a stopped instance), how long in whole seconds
	// (rounded down) it has exchanged nothing with any primary: 0 while its walreceiver is
	// connected. Absent while postgres runs as primary.
	PrimarySilenceSeconds *int64 `json:"primarySilenceSeconds,omitempty"`
	// Time is the instance's clock when it answered (RFC 3339): the agent compares it with its
	// own, since a primary Lease renewed by a clock too far ahead is refused (ReasonClockSkew).
	Time string `json:"time,omitempty"`
	// Reason and Message explain the role when it is not what was asked for.
	Reason  Reason `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Archive is a primary's continuous archiving of its WAL to the backup repository. Times are
// RFC 3339; postgres keeps every segment not yet archived, so a failing archive loses nothing
// while the volume has room.
type Archive struct {
	// Repository is where the WAL goes: s3://bucket/path at endpoint.
	Repository string `json:"repository"`
	// LastArchivedWAL and LastArchivedTime: the newest segment in the repository, and when it
	// went (postgres's pg_stat_archiver).
	LastArchivedWAL  string `json:"lastArchivedWAL,omitempty"`
	LastArchivedTime string `json:"lastArchivedTime,omitempty"`
	// LastFailedWAL and LastFailedTime: the last segment whose push failed, and when.
	LastFailedWAL  string `json:"lastFailedWAL,omitempty"`
	LastFailedTime string `json:"lastFailedTime,omitempty"`
	// Error is why the last push failed (pgBackRest's message, the store's error code, the
	// repository), or why the repository could not be prepared; empty while archiving works.
	Error string `json:"error,omitempty"`
}

// Synchronous is a primary's synchronous replication; the field names are the API's
// InstanceSynchronous.
type Synchronous struct {
	// Durability is required or preferred.
	Durability string `json:"durability,omitempty"`
	// Wanted is how many standbys a commit should wait for.
	Wanted int `json:"wanted,omitempty"`
	// Number is how many it waits for now (0: asynchronous).
	Number int `json:"number"`
	// StandbyNames is synchronous_standby_names in effect.
	StandbyNames string `json:"standbyNames,omitempty"`
	// Standbys are the standbys it may wait for (other clusters' pods).
	Standbys []string `json:"standbys,omitempty"`
	// Synchronous are those that confirm commits now (sync_state sync or quorum).
	Synchronous []string `json:"synchronous,omitempty"`
	// Waiting: required, and fewer than Wanted stream: commits do not return.
	Waiting bool `json:"waiting,omitempty"`
	// Degraded: preferred, and fewer than Wanted stream: commits wait for Number.
	Degraded bool `json:"degraded,omitempty"`
}

// Replica is one row of the primary's pg_stat_replication; the field names are the API's
// StandbyReplication.
type Replica struct {
	// Pod is the standby's application_name.
	Pod       string `json:"pod"`
	State     string `json:"state,omitempty"`
	SyncState string `json:"syncState,omitempty"`
	FlushLSN  string `json:"flushLSN,omitempty"`
}

// Demotion is how an instance last stopped as primary; the field names are the API's
// InstanceDemotion.
type Demotion struct {
	// Epoch is the epoch at which it was primary.
	Epoch int64 `json:"epoch"`
	// FinalLSN is its shutdown checkpoint's location (pg_controldata "Latest checkpoint
	// location"): every WAL record it wrote comes before it. Empty when postgres did not stop
	// cleanly.
	FinalLSN string `json:"finalLSN,omitempty"`
	// Timeline is that checkpoint's timeline.
	Timeline int64 `json:"timeline,omitempty"`
	// Message says why there is no FinalLSN.
	Message string `json:"message,omitempty"`
}

// Rejoin methods.
const (
	// RejoinRewound: pg_rewind made the data directory a copy of the new primary's from where
	// their histories forked.
	RejoinRewound = "Rewound"
	// RejoinNoRewindNeeded: pg_rewind found nothing to undo (the old primary wrote nothing the new
	// one lacks).
	RejoinNoRewindNeeded = "NoRewindNeeded"
	// RejoinRecloned: pg_rewind failed; the data directory was moved to DivergedData and the
	// instance cloned the new primary afresh.
	RejoinRecloned = "Recloned"
)

// Rejoin is a former primary's return as a standby; the field names are the API's InstanceRejoin.
type Rejoin struct {
	// Epoch is the epoch whose primary it rejoined.
	Epoch int64 `json:"epoch"`
	// Method is RejoinRewound, RejoinNoRewindNeeded or RejoinRecloned.
	Method string `json:"method"`
	// DivergedData is where its old data directory was kept (RejoinRecloned).
	DivergedData string `json:"divergedData,omitempty"`
	// Message is what pg_rewind said.
	Message string `json:"message,omitempty"`
}

// Failsafe is what a primary reports of the standbys it must hear from.
type Failsafe struct {
	// Active: the Lease can no longer be renewed and the primary takes writes on the failsafe.
	Active bool `json:"active,omitempty"`
	// Members are the standbys of its membership (the pod's dbfleet.io/standbys): the pods of the
	// database the hub last gave it, in its own cluster and others.
	Members []string `json:"members"`
	// Unheard are the members it has not heard from within FailsafeWindow.
	Unheard []string `json:"unheard,omitempty"`
}
