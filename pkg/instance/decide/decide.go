package decide

import (
	"fmt"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// Pod is what the instance last read of its own Pod.
type Pod struct {
	// Known is false until the Pod has been read once.
	Known bool
	// Role is the pod's dbfleet.io/role label.
	Role string
	// Epoch is the pod's dbfleet.io/epoch annotation (0: missing or malformed).
	Epoch int64
	// PrimaryEndpoint is host:port of the primary to follow or clone from.
	PrimaryEndpoint string
	// PromoteAfterLSN is a planned switchover's promotion token: the old primary's final LSN,
	// which a standby must have replayed past before it promotes at Epoch.
	PromoteAfterLSN string
}

// Local is the state of this instance: its data directory and what postgres runs as.
type Local struct {
	// HasData: the data directory holds a database.
	HasData bool
	// PromotedEpoch is the epoch at which this data directory was last bootstrapped or promoted.
	PromotedEpoch int64
	// FencedEpoch is the highest epoch at which this instance fenced itself.
	FencedEpoch int64
	// ActedEpoch is the highest pod epoch the instance has accepted.
	ActedEpoch int64
	// Running is what postgres runs as now: RolePrimary, RoleStandby or RoleStopped.
	Running contract.Role
	// ReplayedLSN is, while postgres runs as a standby, the last WAL location it replayed as last
	// read (empty when not known).
	ReplayedLSN string
	// PrimarySilence is how long this instance has exchanged nothing with any primary, on its
	// own monotonic clock (pkg/instance/contact).
	PrimarySilence time.Duration
}

// Input is everything Decide looks at.
type Input struct {
	Now     time.Time
	Cluster string
	Pod     Pod
	Lease   Lease
	Local   Local
	// Failsafe is what postgres, running as primary, last heard of its standbys.
	Failsafe Failsafe
}

// Action is what the manager should do.
type Action string

const (
	// ActionNone: leave postgres as it is (waiting, or already right).
	ActionNone Action = "None"
	// ActionBootstrap: initdb, start as primary, create the roles.
	ActionBootstrap Action = "Bootstrap"
	// ActionClone: pg_basebackup from the primary endpoint into an empty data directory.
	ActionClone Action = "Clone"
	// ActionRunStandby: run (or keep running) as a standby following Decision.PrimaryEndpoint,
	// re-pointing and reloading when it changed.
	ActionRunStandby Action = "RunStandby"
	// ActionPromote: promote the running standby (pg_ctl promote) and record the epoch.
	ActionPromote Action = "Promote"
	// ActionRunPrimary: run (or keep running) as primary; start it if it is stopped.
	ActionRunPrimary Action = "RunPrimary"
	// ActionFence: stop taking writes (fast shutdown, immediate at WritableUntil) and record
	// FencedEpoch; postgres stays stopped.
	ActionFence Action = "Fence"
)

// Decision is what to do, at which epoch, and why.
type Decision struct {
	Action Action
	// Epoch is the epoch acted on: the pod's, unless it is stale.
	Epoch int64
	// FencedEpoch is the epoch to record as fenced (ActionFence).
	FencedEpoch int64
	// PrimaryEndpoint is the endpoint to follow or clone from.
	PrimaryEndpoint string
	// Lease is the judgement of the Lease for "<cluster>/<Epoch>": the manager arms its fence
	// timer at Lease.FenceAt while postgres runs as primary.
	Lease LeaseJudgement
	// Reason and Message explain a role other than the one asked for.
	Reason  contract.Reason
	Message string
}

// Holder is the Lease holder of the primary at epoch in cluster: "<cluster>/<epoch>".
func Holder(cluster string, epoch int64) string { return fmt.Sprintf("%s/%d", cluster, epoch) }

// Decide says what postgres should be doing. Its rules:
//   - postgres runs as primary only while the pod is primary at epoch E, the Lease names
//     "<cluster>/<E>" and is valid, and this data directory was bootstrapped or promoted at E;
//   - a running primary whose Lease is no longer valid, or whose pod is no longer primary, is
//     fenced, and stays stopped while the pod's epoch is not above the fenced one;
//   - a pod epoch below one already accepted is stale and never acted on;
//   - only the first primary (epoch 1, empty data directory) bootstraps; others clone;
//   - a standby handed a promote-after LSN (a planned switchover) promotes only once it has
//     replayed past it.
func Decide(in Input) Decision {
	local, pod := in.Local, in.Pod
	acted := max(local.ActedEpoch, local.PromotedEpoch, local.FencedEpoch)
	stale := pod.Known && pod.Epoch > 0 && pod.Epoch < acted
	epoch := acted
	if pod.Known && pod.Epoch > acted {
		epoch = pod.Epoch
	}
	lease := JudgeLease(in.Lease, Holder(in.Cluster, epoch), in.Now)
	if RunsAsPrimaryAt(local, pod, epoch) {
		lease = JudgeFailsafe(lease, in.Lease, Holder(in.Cluster, epoch), in.Failsafe, in.Now)
	}
	d := Decision{Action: ActionNone, Epoch: epoch, Lease: lease, PrimaryEndpoint: pod.PrimaryEndpoint}

	fence := func(reason contract.Reason, msg string) Decision {
		d.Action, d.Reason, d.Message = ActionFence, reason, msg
		d.FencedEpoch = max(local.PromotedEpoch, local.FencedEpoch)
		return d
	}

	// A running primary keeps running only under a valid Lease at its epoch and a pod that is
	// still primary; nothing else below may leave it writable.
	if local.Running == contract.RolePrimary {
		if !lease.Valid {
			return fence(orReason(lease.Reason, contract.ReasonFenced), lease.Message)
		}
		if !stale && pod.Known && pod.Role != contract.PodRolePrimary {
			if pod.Role == contract.PodRoleFenced {
				return fence(contract.ReasonPodRoleFenced, "the agent labelled the pod fenced")
			}
			return fence(contract.ReasonFenced, fmt.Sprintf("the pod's role is %q at epoch %d", pod.Role, pod.Epoch))
		}
	}
	if !pod.Known || pod.Epoch <= 0 || pod.Role == "" {
		d.Reason, d.Message = contract.ReasonWaitingForPod, "waiting for the pod's dbfleet.io/role label and dbfleet.io/epoch annotation"
		return d
	}
	if stale {
		d.Reason = contract.ReasonStaleEpoch
		d.Message = fmt.Sprintf("the pod's epoch %d is below epoch %d already acted on", pod.Epoch, acted)
		return d
	}

	switch pod.Role {
	case contract.PodRoleFenced:
		d.Reason, d.Message = contract.ReasonPodRoleFenced, "the agent labelled the pod fenced"
		if local.Running != contract.RoleStopped {
			return fence(d.Reason, d.Message)
		}
		return d
	case contract.PodRolePrimary:
		return decidePrimary(d, local, epoch, pod.PromoteAfterLSN)
	default:
		return decideStandby(d, local, epoch)
	}
}

func decidePrimary(d Decision, local Local, epoch int64, promoteAfter string) Decision {
	lease := d.Lease
	switch {
	case local.FencedEpoch >= epoch:
		d.Reason = contract.ReasonFenced
		d.Message = fmt.Sprintf("fenced at epoch %d; waiting for a higher epoch", local.FencedEpoch)
		if !lease.Valid && lease.Reason != "" {
			// Keep saying why (a skewed clock, a lost Lease): the fence alone does not.
			d.Reason, d.Message = lease.Reason, d.Message+": "+lease.Message
		}
		if local.Running != contract.RoleStopped {
			d.Action, d.FencedEpoch = ActionFence, local.FencedEpoch
		}
		return d
	case !local.HasData:
		if epoch != 1 || local.PromotedEpoch != 0 {
			d.Reason = contract.ReasonNoData
			d.Message = fmt.Sprintf("primary at epoch %d with an empty data directory: only the first primary (epoch 1) initialises a database", epoch)
			return d
		}
		if !lease.Valid {
			d.Reason, d.Message = lease.Reason, lease.Message
			return d
		}
		d.Action = ActionBootstrap
		return d
	case !lease.Valid:
		// A standby stays a (read-only) standby until the Lease arrives; nothing starts writable.
		d.Reason, d.Message = lease.Reason, lease.Message
		return d
	case local.PromotedEpoch == epoch && local.Running != contract.RoleStandby:
		d.Action = ActionRunPrimary
		if lease.Failsafe {
			d.Reason, d.Message = lease.Reason, lease.Message
		}
		return d
	case local.Running == contract.RoleStopped:
		// Promoted at an older epoch (or never): come up as a standby, then promote. It follows
		// nobody meanwhile: the primary endpoint now names this very instance.
		d.Action, d.PrimaryEndpoint = ActionRunStandby, ""
		return d
	case local.Running == contract.RoleStandby && promoteAfter != "":
		// A planned switchover: every commit of the old primary must be here first. A standby
		// that never gets there stays one (the hub's message and this one say so). The old
		// primary stopped before the hub had its final LSN: no silence to wait for.
		if ok, msg := replayedPast(promoteAfter, local.ReplayedLSN); !ok {
			d.Reason, d.Message = contract.ReasonWaitingForReplay, msg
			return d
		}
		d.Action = ActionPromote
		return d
	case local.Running == contract.RoleStandby && wasPrimaryBefore(local, epoch):
		// The same data directory again, at the epoch after its own (the hub re-promotes a
		// fenced or lost primary that nobody is ahead of): the only primary the silence would
		// wait out is this one, and it stopped (postgres runs here as a standby now, and a data
		// directory has one postmaster). Waiting would only stop writes longer.
		d.Action = ActionPromote
		return d
	case local.Running == contract.RoleStandby && local.PrimarySilence < contract.PromotionSilence:
		// A failover: the old primary may still take writes, without its Lease, while it hears
		// this standby (its failsafe). Stop following it, then promote only once nothing has been
		// exchanged with any primary for longer than its failsafe lasts.
		d.Action, d.PrimaryEndpoint = ActionRunStandby, ""
		d.Reason = contract.ReasonWaitingForSilence
		d.Message = fmt.Sprintf("a failover without a promotion token: this standby exchanged WAL with a primary %s ago; it follows nobody now and promotes once silent for %s",
			local.PrimarySilence.Truncate(100*time.Millisecond), contract.PromotionSilence)
		return d
	default:
		// A standby is promoted; a primary still running from an older epoch adopts this one.
		d.Action = ActionPromote
		return d
	}
}

// wasPrimaryBefore says this data directory was the primary of the epoch just before epoch.
// Every epoch has one primary (the hub raises it at each promotion), and the state that records
// PromotedEpoch is this pod's own (a clone drops the copy it received), so no other instance
// can have been the primary the silence rule waits out.
func wasPrimaryBefore(local Local, epoch int64) bool {
	return local.PromotedEpoch > 0 && local.PromotedEpoch == epoch-1
}

// RunsAsPrimaryAt says postgres runs as the primary promoted at epoch and the pod is still the
// primary at that epoch (as last read): the only case the failsafe may keep writable.
func RunsAsPrimaryAt(local Local, pod Pod, epoch int64) bool {
	return local.Running == contract.RolePrimary && local.PromotedEpoch == epoch && local.FencedEpoch < epoch &&
		pod.Known && pod.Role == contract.PodRolePrimary && pod.Epoch == epoch
}

func decideStandby(d Decision, local Local, epoch int64) Decision {
	switch {
	case local.FencedEpoch >= epoch:
		d.Reason = contract.ReasonFenced
		d.Message = fmt.Sprintf("fenced at epoch %d; waiting for a higher epoch", local.FencedEpoch)
		return d
	case d.PrimaryEndpoint == "":
		d.Reason, d.Message = contract.ReasonNoPrimaryEndpoint, "the pod has no dbfleet.io/primary-endpoint annotation"
		return d
	case !local.HasData:
		d.Action = ActionClone
		return d
	default:
		d.Action = ActionRunStandby
		return d
	}
}

func orReason(r, otherwise contract.Reason) contract.Reason {
	if r == "" {
		return otherwise
	}
	return r
}
