package decide

import (
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// The failsafe keeps a running primary writable past its Lease only while it hears every
// standby, only at the epoch it was promoted at, and only for a Lease that still names it.
func TestFailsafe(t *testing.T) {
	expired := lease("east/3", time.Minute, 15*time.Second)
	primaryPod := Pod{Known: true, Role: contract.PodRolePrimary, Epoch: 3}
	running := Local{HasData: true, PromotedEpoch: 3, ActedEpoch: 3, Running: contract.RolePrimary}
	hears := Failsafe{Members: []string{"orders-1", "orders-2"}, Until: now.Add(5 * time.Second)}
	tests := []struct {
		name     string
		pod      Pod
		lease    Lease
		local    Local
		fs       Failsafe
		action   Action
		reason   contract.Reason
		failsafe bool
	}{
		{name: "Lease run out, every standby heard", pod: primaryPod, lease: expired, local: running, fs: hears,
			action: ActionRunPrimary, reason: contract.ReasonFailsafe, failsafe: true},
		{name: "Lease from a clock an hour ahead, every standby heard", pod: primaryPod, lease: lease("east/3", -time.Hour, 15*time.Second), local: running, fs: hears,
			action: ActionRunPrimary, reason: contract.ReasonFailsafe, failsafe: true},
		{name: "a standby unheard", pod: primaryPod, lease: expired, local: running,
			fs:     Failsafe{Members: []string{"orders-1", "orders-2"}, Unheard: []string{"orders-2"}},
			action: ActionFence, reason: contract.ReasonFenced},
		{name: "the earliest hearing too old to cover the shutdown", pod: primaryPod, lease: expired, local: running,
			fs:     Failsafe{Members: []string{"orders-1"}, Until: now.Add(contract.FenceSafety + FenceLead)},
			action: ActionFence, reason: contract.ReasonFenced},
		{name: "the Lease released (a demotion)", pod: primaryPod, lease: Lease{}, local: running, fs: hears,
			action: ActionFence, reason: contract.ReasonLeaseNotHeld},
		{name: "the Lease names a newer epoch", pod: primaryPod, lease: lease("east/4", 0, 15*time.Second), local: running, fs: hears,
			action: ActionFence, reason: contract.ReasonLeaseNotHeld},
		{name: "the pod labelled fenced", pod: Pod{Known: true, Role: contract.PodRoleFenced, Epoch: 3}, lease: expired, local: running, fs: hears,
			action: ActionFence, reason: contract.ReasonFenced},
		{name: "the pod a replica at a newer epoch", pod: Pod{Known: true, Role: contract.PodRoleReplica, Epoch: 4, PrimaryEndpoint: "10.0.0.2:5432"},
			lease: expired, local: running, fs: hears, action: ActionFence, reason: contract.ReasonLeaseNotHeld},
		{name: "a crashed primary does not start on it", pod: primaryPod, lease: expired,
			local: Local{HasData: true, PromotedEpoch: 3, ActedEpoch: 3, Running: contract.RoleStopped}, fs: hears,
			action: ActionNone, reason: contract.ReasonFenced},
		{name: "a standby does not promote on it", pod: primaryPod, lease: expired,
			local: Local{HasData: true, PromotedEpoch: 2, ActedEpoch: 3, Running: contract.RoleStandby, PrimarySilence: time.Hour}, fs: hears,
			action: ActionNone, reason: contract.ReasonFenced},
		{name: "a valid Lease needs no failsafe", pod: primaryPod, lease: lease("east/3", 0, 15*time.Second), local: running, fs: hears,
			action: ActionRunPrimary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(Input{Now: now, Cluster: "east", Pod: tt.pod, Lease: tt.lease, Local: tt.local, Failsafe: tt.fs})
			if d.Action != tt.action || d.Reason != tt.reason || d.Lease.Failsafe != tt.failsafe {
				t.Fatalf("Decide = %s (reason %q: %s, failsafe %t), want %s (reason %q, failsafe %t)",
					d.Action, d.Reason, d.Message, d.Lease.Failsafe, tt.action, tt.reason, tt.failsafe)
			}
			if tt.failsafe {
				if want := tt.fs.Until.Add(-contract.FenceSafety); !d.Lease.WritableUntil.Equal(want) || !d.Lease.FenceAt.Equal(want.Add(-FenceLead)) {
					t.Errorf("writable until %s, fence at %s; want %s and FenceLead before it", d.Lease.WritableUntil, d.Lease.FenceAt, want)
				}
			}
		})
	}
}
