package instance

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/test/framework"
)

// The two readings the failsafe rests on, on real servers: the primary hears its standby through
// the replication protocol (an idle primary too: nothing but the manager's own write check
// moves its WAL), and a standby promoted in a failover (no promotion token) stops following,
// then promotes only once it has exchanged nothing with a primary for contract.PromotionSilence,
// by which time the old primary no longer counts it as heard. The old primary's Lease is kept
// valid here to show the standby's rule holds by itself; the hub never promotes while that Lease
// may be valid.
func TestFailoverPromotionWaitsForSilenceFromTheOldPrimary(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"silence-east", "silence-west"} {
		createNamespace(ctx, t, ns)
	}
	east := newProc(ctx, t, "silence-0", "silence-east", "east")
	west := newProc(ctx, t, "silence-1", "silence-west", "west")
	createPod(ctx, t, east.namespace, east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod)
	createPod(ctx, t, west.namespace, west.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	renew(t, east.namespace, decide.Holder("east", 1))
	east.start(t)
	east.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	west.start(t)
	west.waitStatus(ctx, t, "streaming, not silent", func(s contract.Status) bool {
		return s.Role == contract.RoleStandby && s.Streaming && s.PrimarySilenceSeconds != nil && *s.PrimarySilenceSeconds == 0
	})
	east.waitStatus(ctx, t, "hearing its one standby", func(s contract.Status) bool {
		return s.Failsafe != nil && slices.Equal(s.Failsafe.Members, []string{west.pod}) && len(s.Failsafe.Unheard) == 0
	})
	// Idle for longer than the window: the primary goes on hearing it.
	time.Sleep(contract.FailsafeWindow + time.Second)
	if st, err := east.status(ctx); err != nil || st.Failsafe == nil || len(st.Failsafe.Unheard) != 0 {
		t.Fatalf("east after an idle failsafe window: %+v (%v); want %s heard", st.Failsafe, err, west.pod)
	}

	// The hub promotes west at epoch 2 with no promotion token: a failover.
	setPod(ctx, t, west.namespace, west.pod, contract.PodRolePrimary, 2, east.endpoint(), east.pod)
	renew(t, west.namespace, decide.Holder("west", 2))
	var lastContact time.Time
	var waited bool
	err := framework.WaitFor(ctx, 2*time.Minute, "west promoted", func(ctx context.Context) (bool, error) {
		st, err := west.status(ctx)
		if err != nil {
			return false, nil
		}
		switch {
		case st.Role == contract.RolePrimary:
			return true, nil
		case st.PrimarySilenceSeconds != nil && *st.PrimarySilenceSeconds == 0:
			lastContact = time.Now()
		case st.Reason == contract.ReasonWaitingForSilence:
			waited = true
			if st.Streaming {
				t.Errorf("west streams while it waits for silence: it must follow nobody")
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	if !waited {
		t.Errorf("west never reported %s", contract.ReasonWaitingForSilence)
	}
	if silent := promoted.Sub(lastContact); silent < contract.PromotionSilence-time.Second {
		t.Errorf("west promoted %s after it last reported contact with a primary; want at least %s", silent, contract.PromotionSilence)
	}
	// By then the old primary no longer counts west as heard: its failsafe would have ended.
	if st, err := east.status(ctx); err != nil || st.Failsafe == nil || !slices.Equal(st.Failsafe.Unheard, []string{west.pod}) {
		t.Errorf("east when west promoted: %+v (%v); want %s unheard", st.Failsafe, err, west.pod)
	}
}

// The silence rule waits out the old primary; when the pod promoted is that old primary itself
// (the hub re-promotes a fenced primary that no standby is ahead of), there is nobody to wait
// for: it comes up as a standby following nobody and promotes at once, never reporting
// WaitingForSilence (on a busy machine that wait once kept such a primary from writes for 13 s
// after every self-fencing).
func TestFencedPrimaryPromotedAgainWaitsForNoSilence(t *testing.T) {
	ctx := context.Background()
	const ns = "repromote"
	createNamespace(ctx, t, ns)
	p := newProc(ctx, t, "repromote-0", ns, "east")
	createPod(ctx, t, ns, p.pod, contract.PodRolePrimary, 1, p.endpoint(), "")
	r := renew(t, ns, decide.Holder("east", 1))
	p.start(t)
	p.waitStatus(ctx, t, "primary at epoch 1", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Epoch == 1
	})

	// The agent fences it (its Lease lapsed), then the hub hands the same pod epoch 2.
	r.stop()
	setPod(ctx, t, ns, p.pod, contract.PodRoleFenced, 1, p.endpoint(), "")
	p.waitStatus(ctx, t, "fenced at epoch 1", func(s contract.Status) bool { return s.Role == contract.RoleFenced })
	setPod(ctx, t, ns, p.pod, contract.PodRolePrimary, 2, p.endpoint(), "")
	renew(t, ns, decide.Holder("east", 2))
	var waited []string
	err := framework.WaitFor(ctx, 2*time.Minute, "primary again at epoch 2", func(ctx context.Context) (bool, error) {
		st, err := p.status(ctx)
		if err != nil {
			return false, nil
		}
		if st.Reason == contract.ReasonWaitingForSilence {
			waited = append(waited, st.Message)
		}
		return st.Role == contract.RolePrimary && st.Ready && st.Epoch == 2 && st.PromotedEpoch == 2, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(waited) > 0 {
		t.Errorf("the old primary of epoch 1 waited for silence from itself before it promoted at epoch 2: %q", waited[0])
	}
}
