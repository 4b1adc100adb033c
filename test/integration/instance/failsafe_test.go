package instance

import (
	"context"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/test/framework"
)

// A primary whose Lease is no longer renewed (the agent, the hub or the link between them down)
// goes on taking writes while it hears both its standbys, well past the Lease; once one of them
// falls silent it stops, and its last acknowledged write comes before that standby could have
// promoted (contract.PromotionSilence after its last contact).
func TestFailsafePrimaryWritesOnWhileItHearsEveryStandby(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"failsafe-east", "failsafe-west", "failsafe-south"} {
		createNamespace(ctx, t, ns)
	}
	east := newProc(ctx, t, "failsafe-0", "failsafe-east", "east")
	west := newProc(ctx, t, "failsafe-1", "failsafe-west", "west")
	south := newProc(ctx, t, "failsafe-2", "failsafe-south", "south")
	createPod(ctx, t, east.namespace, east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod+","+south.pod)
	createPod(ctx, t, west.namespace, west.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	createPod(ctx, t, south.namespace, south.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	lease := renew(t, east.namespace, decide.Holder("east", 1))
	east.start(t)
	east.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	execSQL(ctx, t, east, "CREATE TABLE rows (n int PRIMARY KEY)")
	for _, p := range []*proc{west, south} {
		p.start(t)
		p.waitStatus(ctx, t, "streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })
	}
	east.waitStatus(ctx, t, "hearing both standbys", func(s contract.Status) bool {
		return s.Failsafe != nil && len(s.Failsafe.Members) == 2 && len(s.Failsafe.Unheard) == 0
	})
	w := startWriter(ctx, t, east)
	waitWrites(t, w, 50)

	lease.stop()
	cut := time.Now()
	east.waitStatus(ctx, t, "on its failsafe", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Failsafe != nil && s.Failsafe.Active && s.Reason == contract.ReasonFailsafe
	})
	// Writes go on well past the Lease (leaseDuration) and past a whole failsafe window.
	past := cut.Add(leaseDuration + 2*contract.FailsafeWindow)
	err := framework.WaitFor(ctx, 2*time.Minute, "writes acknowledged past the Lease and two failsafe windows", func(context.Context) (bool, error) {
		last, _ := w.lastSuccess()
		return last.After(past), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := east.status(ctx); err != nil || st.Role != contract.RolePrimary || st.Restarts != 0 {
		t.Fatalf("east %+v (%v); want the primary running all along", st, err)
	}

	south.stop(t)
	southGone := time.Now()
	east.waitStatus(ctx, t, "fenced once a standby fell silent", func(s contract.Status) bool { return s.Role == contract.RoleFenced })
	last, _ := w.lastSuccess()
	if deadline := southGone.Add(contract.PromotionSilence); !last.Before(deadline) {
		t.Errorf("east acknowledged a write at %s, %s after south went silent; south could have promoted %s after it",
			last.Format(time.RFC3339Nano), last.Sub(southGone), contract.PromotionSilence)
	}
	t.Logf("last write on east %s after south went silent (its failsafe window %s)", last.Sub(southGone).Round(time.Millisecond), contract.FailsafeWindow)
}
