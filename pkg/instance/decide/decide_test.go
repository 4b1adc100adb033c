package decide

import (
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func lease(holder string, renewedAgo time.Duration, d time.Duration) Lease {
	return Lease{Exists: true, Holder: holder, RenewTime: now.Add(-renewedAgo), Duration: d}
}

func TestJudgeLease(t *testing.T) {
	tests := []struct {
		name      string
		lease     Lease
		valid     bool
		reason    contract.Reason
		writeEnds time.Time
	}{
		{name: "fresh", lease: lease("east/3", 0, 15*time.Second), valid: true, writeEnds: now.Add(13 * time.Second)},
		{name: "absent", lease: Lease{}, reason: contract.ReasonLeaseNotHeld},
		{name: "other epoch", lease: lease("east/2", 0, 15*time.Second), reason: contract.ReasonLeaseNotHeld},
		{name: "other cluster", lease: lease("west/3", 0, 15*time.Second), reason: contract.ReasonLeaseNotHeld},
		{name: "renewTime within the skew", lease: lease("east/3", -contract.MaxClockSkew, 15*time.Second), valid: true,
			writeEnds: now.Add(contract.MaxClockSkew + 13*time.Second)},
		{name: "renewTime beyond the skew", lease: lease("east/3", -contract.MaxClockSkew-time.Millisecond, 15*time.Second), reason: contract.ReasonClockSkew},
		{name: "renewTime an hour ahead", lease: lease("east/3", -time.Hour, 15*time.Second), reason: contract.ReasonClockSkew},
		// Writable until expiry - FenceSafety; the fast shutdown starts FenceLead before that.
		{name: "just before the fence point", lease: lease("east/3", 15*time.Second-contract.FenceSafety-FenceLead-time.Millisecond, 15*time.Second),
			valid: true, writeEnds: now.Add(FenceLead + time.Millisecond)},
		{name: "at the fence point", lease: lease("east/3", 15*time.Second-contract.FenceSafety-FenceLead, 15*time.Second),
			reason: contract.ReasonFenced, writeEnds: now.Add(FenceLead)},
		{name: "expired", lease: lease("east/3", time.Minute, 15*time.Second), reason: contract.ReasonFenced,
			writeEnds: now.Add(-time.Minute + 13*time.Second)},
		{name: "no duration", lease: lease("east/3", 0, 0), reason: contract.ReasonLeaseNotHeld},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := JudgeLease(tt.lease, "east/3", now)
			if j.Valid != tt.valid || j.Reason != tt.reason {
				t.Fatalf("valid=%v reason=%q (%s), want valid=%v reason=%q", j.Valid, j.Reason, j.Message, tt.valid, tt.reason)
			}
			if !j.WritableUntil.Equal(tt.writeEnds) {
				t.Errorf("WritableUntil = %s, want %s", j.WritableUntil, tt.writeEnds)
			}
			if !tt.writeEnds.IsZero() && !j.FenceAt.Equal(tt.writeEnds.Add(-FenceLead)) {
				t.Errorf("FenceAt = %s, want WritableUntil - FenceLead", j.FenceAt)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	valid := func(e string) Lease { return lease(e, 0, 15*time.Second) }
	primary := func(epoch int64) Pod {
		return Pod{Known: true, Role: contract.PodRolePrimary, Epoch: epoch, PrimaryEndpoint: "10.0.0.1:5432"}
	}
	switchover := func(epoch int64, lsn string) Pod {
		p := primary(epoch)
		p.PromoteAfterLSN = lsn
		return p
	}
	replica := func(epoch int64, endpoint string) Pod {
		return Pod{Known: true, Role: contract.PodRoleReplica, Epoch: epoch, PrimaryEndpoint: endpoint}
	}
	tests := []struct {
		name   string
		pod    Pod
		lease  Lease
		local  Local
		action Action
		reason contract.Reason
		epoch  int64
		fenced int64
	}{
		{name: "pod not read yet", pod: Pod{}, local: Local{Running: contract.RoleStopped},
			action: ActionNone, reason: contract.ReasonWaitingForPod},
		{name: "first primary bootstraps", pod: primary(1), lease: valid("east/1"), local: Local{Running: contract.RoleStopped},
			action: ActionBootstrap, epoch: 1},
		{name: "first primary waits for the Lease", pod: primary(1), local: Local{Running: contract.RoleStopped},
			action: ActionNone, reason: contract.ReasonLeaseNotHeld, epoch: 1},
		{name: "first primary with a skewed Lease does not bootstrap", pod: primary(1), lease: lease("east/1", -time.Hour, 15*time.Second),
			local: Local{Running: contract.RoleStopped}, action: ActionNone, reason: contract.ReasonClockSkew, epoch: 1},
		{name: "a later primary never initialises an empty data directory", pod: primary(2), lease: valid("east/2"),
			local: Local{Running: contract.RoleStopped}, action: ActionNone, reason: contract.ReasonNoData, epoch: 2},
		{name: "primary restarts in place at its epoch", pod: primary(3), lease: valid("east/3"),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RoleStopped}, action: ActionRunPrimary, epoch: 3},
		{name: "running primary keeps running", pod: primary(3), lease: valid("east/3"),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionRunPrimary, epoch: 3},
		{name: "primary fences when the Lease runs out", pod: primary(3), lease: lease("east/3", 14*time.Second, 15*time.Second),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionFence, reason: contract.ReasonFenced, epoch: 3, fenced: 3},
		{name: "primary fences when the Lease is released", pod: primary(3),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionFence, reason: contract.ReasonLeaseNotHeld, epoch: 3, fenced: 3},
		{name: "primary fences on a skewed Lease", pod: primary(3), lease: lease("east/3", -time.Hour, 15*time.Second),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionFence, reason: contract.ReasonClockSkew, epoch: 3, fenced: 3},
		{name: "primary fences when its Lease names a newer epoch elsewhere", pod: replica(4, "10.0.0.2:5432"), lease: valid("west/4"),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionFence, reason: contract.ReasonLeaseNotHeld, epoch: 4, fenced: 3},
		{name: "primary fences when the agent labels it fenced", pod: Pod{Known: true, Role: contract.PodRoleFenced, Epoch: 3}, lease: valid("east/3"),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionFence, reason: contract.ReasonPodRoleFenced, epoch: 3, fenced: 3},
		{name: "fenced stays fenced under a renewed Lease at the same epoch", pod: primary(3), lease: valid("east/3"),
			local: Local{HasData: true, PromotedEpoch: 3, FencedEpoch: 3, Running: contract.RoleStopped}, action: ActionNone, reason: contract.ReasonFenced, epoch: 3},
		{name: "fenced under a skewed Lease says ClockSkew", pod: primary(3), lease: lease("east/3", -time.Hour, 15*time.Second),
			local: Local{HasData: true, PromotedEpoch: 3, FencedEpoch: 3, Running: contract.RoleStopped}, action: ActionNone, reason: contract.ReasonClockSkew, epoch: 3},
		{name: "fenced follows as a standby at a higher epoch", pod: replica(4, "10.0.0.2:5432"), lease: valid("west/4"),
			local: Local{HasData: true, PromotedEpoch: 3, FencedEpoch: 3, Running: contract.RoleStopped}, action: ActionRunStandby, epoch: 4},
		{name: "fenced is primary again at a higher epoch, through a standby", pod: primary(5), lease: valid("east/5"),
			local: Local{HasData: true, PromotedEpoch: 3, FencedEpoch: 3, Running: contract.RoleStopped}, action: ActionRunStandby, epoch: 5},
		{name: "standby promoted at a new epoch once silent", pod: primary(2), lease: valid("east/2"),
			local:  Local{HasData: true, Running: contract.RoleStandby, PrimarySilence: contract.PromotionSilence},
			action: ActionPromote, epoch: 2},
		{name: "standby promoted in a failover stops following and waits for silence", pod: primary(2), lease: valid("east/2"),
			local:  Local{HasData: true, Running: contract.RoleStandby, PrimarySilence: contract.PromotionSilence - time.Millisecond},
			action: ActionRunStandby, reason: contract.ReasonWaitingForSilence, epoch: 2},
		{name: "the primary of the epoch before, fenced, is promoted again without waiting for silence", pod: primary(3), lease: valid("east/3"),
			local:  Local{HasData: true, PromotedEpoch: 2, FencedEpoch: 2, Running: contract.RoleStandby},
			action: ActionPromote, epoch: 3},
		{name: "the primary of the epoch before, crashed, is promoted again without waiting for silence", pod: primary(3), lease: valid("east/3"),
			local:  Local{HasData: true, PromotedEpoch: 2, Running: contract.RoleStandby},
			action: ActionPromote, epoch: 3},
		{name: "a primary of an older epoch waits for silence: another was primary since", pod: primary(4), lease: valid("east/4"),
			local:  Local{HasData: true, PromotedEpoch: 2, FencedEpoch: 2, Running: contract.RoleStandby, PrimarySilence: contract.PromotionSilence - time.Millisecond},
			action: ActionRunStandby, reason: contract.ReasonWaitingForSilence, epoch: 4},
		{name: "the primary of the epoch before still comes up as a standby first", pod: primary(3), lease: valid("east/3"),
			local:  Local{HasData: true, PromotedEpoch: 2, FencedEpoch: 2, Running: contract.RoleStopped},
			action: ActionRunStandby, epoch: 3},
		{name: "standby not promoted before the Lease names its epoch", pod: primary(2), lease: valid("east/1"),
			local: Local{HasData: true, PromotedEpoch: 1, Running: contract.RoleStandby}, action: ActionNone, reason: contract.ReasonLeaseNotHeld, epoch: 2},
		{name: "standby not promoted under a skewed Lease", pod: primary(2), lease: lease("east/2", -time.Hour, 15*time.Second),
			local: Local{HasData: true, Running: contract.RoleStandby}, action: ActionNone, reason: contract.ReasonClockSkew, epoch: 2},
		{name: "running primary adopts a higher epoch it is handed", pod: primary(4), lease: valid("east/4"),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionPromote, epoch: 4},
		{name: "replica with an empty data directory clones", pod: replica(1, "10.0.0.1:5432"),
			local: Local{Running: contract.RoleStopped}, action: ActionClone, epoch: 1},
		{name: "replica without an endpoint waits", pod: replica(1, ""),
			local: Local{Running: contract.RoleStopped}, action: ActionNone, reason: contract.ReasonNoPrimaryEndpoint, epoch: 1},
		{name: "replica runs as a standby", pod: replica(1, "10.0.0.1:5432"),
			local: Local{HasData: true, Running: contract.RoleStopped}, action: ActionRunStandby, epoch: 1},
		{name: "a stale epoch is never acted on", pod: primary(2), lease: valid("east/2"),
			local: Local{HasData: true, PromotedEpoch: 1, ActedEpoch: 3, Running: contract.RoleStandby}, action: ActionNone, reason: contract.ReasonStaleEpoch, epoch: 3},
		{name: "a stale epoch does not demote a valid primary", pod: replica(2, "10.0.0.2:5432"), lease: valid("east/3"),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionNone, reason: contract.ReasonStaleEpoch, epoch: 3},
		{name: "switchover target waits to replay past the old primary's final LSN", pod: switchover(2, "0/3000028"), lease: valid("east/2"),
			local:  Local{HasData: true, PromotedEpoch: 1, Running: contract.RoleStandby, ReplayedLSN: "0/2FFFF00"},
			action: ActionNone, reason: contract.ReasonWaitingForReplay, epoch: 2},
		{name: "switchover target that replayed up to the final LSN's start still waits", pod: switchover(2, "0/3000028"), lease: valid("east/2"),
			local:  Local{HasData: true, PromotedEpoch: 1, Running: contract.RoleStandby, ReplayedLSN: "0/3000028"},
			action: ActionNone, reason: contract.ReasonWaitingForReplay, epoch: 2},
		{name: "switchover target waits while its replayed LSN is not known", pod: switchover(2, "0/3000028"), lease: valid("east/2"),
			local:  Local{HasData: true, PromotedEpoch: 1, Running: contract.RoleStandby},
			action: ActionNone, reason: contract.ReasonWaitingForReplay, epoch: 2},
		{name: "switchover target promotes once past the final LSN", pod: switchover(2, "0/3000028"), lease: valid("east/2"),
			local:  Local{HasData: true, PromotedEpoch: 1, Running: contract.RoleStandby, ReplayedLSN: "0/30000A0"},
			action: ActionPromote, epoch: 2},
		{name: "switchover target compares LSNs as numbers, not text", pod: switchover(2, "0/F000028"), lease: valid("east/2"),
			local:  Local{HasData: true, PromotedEpoch: 1, Running: contract.RoleStandby, ReplayedLSN: "1/00000A0"},
			action: ActionPromote, epoch: 2},
		{name: "a malformed promote-after LSN never promotes", pod: switchover(2, "soon"), lease: valid("east/2"),
			local:  Local{HasData: true, PromotedEpoch: 1, Running: contract.RoleStandby, ReplayedLSN: "9/0"},
			action: ActionNone, reason: contract.ReasonWaitingForReplay, epoch: 2},
		{name: "the promote-after LSN does not hold back a primary already running at its epoch", pod: switchover(2, "0/3000028"), lease: valid("east/2"),
			local: Local{HasData: true, PromotedEpoch: 2, Running: contract.RolePrimary}, action: ActionRunPrimary, epoch: 2},
		{name: "a stopped switchover target comes up as a standby first", pod: switchover(2, "0/3000028"), lease: valid("east/2"),
			local: Local{HasData: true, PromotedEpoch: 0, Running: contract.RoleStopped}, action: ActionRunStandby, epoch: 2},
		{name: "a stale epoch with an expired Lease still fences", pod: primary(2), lease: lease("east/3", time.Minute, 15*time.Second),
			local: Local{HasData: true, PromotedEpoch: 3, Running: contract.RolePrimary}, action: ActionFence, reason: contract.ReasonFenced, epoch: 3, fenced: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(Input{Now: now, Cluster: "east", Pod: tt.pod, Lease: tt.lease, Local: tt.local})
			if d.Action != tt.action || d.Reason != tt.reason {
				t.Fatalf("Decide = %s (reason %q: %s), want %s (reason %q)", d.Action, d.Reason, d.Message, tt.action, tt.reason)
			}
			if tt.epoch != 0 && d.Epoch != tt.epoch {
				t.Errorf("Epoch = %d, want %d", d.Epoch, tt.epoch)
			}
			if d.FencedEpoch != tt.fenced {
				t.Errorf("FencedEpoch = %d, want %d", d.FencedEpoch, tt.fenced)
			}
			if d.Reason == contract.ReasonWaitingForSilence && d.PrimaryEndpoint != "" {
				t.Errorf("waiting for silence while following %q; it must follow nobody", d.PrimaryEndpoint)
			}
		})
	}
}
