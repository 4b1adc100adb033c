package instance

import (
	"context"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/test/framework"
)

// The promoted pod, waiting to promote (here for its Lease), keeps the replication slots of the
// standbys to come, so a standby the hub points at it at once streams from it while it is still a
// standby (cascading), and goes on streaming through its promotion onto its new timeline without
// being told anything more: the first commits of a synchronous new primary find it connected.
func TestStandbyStreamsFromThePromotedPodBeforeAndAfterItPromotes(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"cascade-east", "cascade-west", "cascade-south"} {
		createNamespace(ctx, t, ns)
	}
	east := newProc(ctx, t, "east-8", "cascade-east", "east")
	west := newProc(ctx, t, "west-9", "cascade-west", "west")
	south := newProc(ctx, t, "south-10", "cascade-south", "south")
	createPod(ctx, t, east.namespace, east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod+","+south.pod)
	createPod(ctx, t, west.namespace, west.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	createPod(ctx, t, south.namespace, south.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	eastLease := renew(t, east.namespace, decide.Holder("east", 1))
	east.start(t)
	east.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	execSQL(ctx, t, east, "CREATE TABLE rows (n int PRIMARY KEY)", "INSERT INTO rows SELECT generate_series(1, 100)")
	for _, p := range []*proc{west, south} {
		p.start(t)
		p.waitStatus(ctx, t, "streaming from east", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })
	}

	// The switchover's demotion: east stops with its final LSN.
	lsn := demote(ctx, t, east, eastLease, 2)
	// The hub promotes west at epoch 2 and, in the same reconcile, points south and east at it;
	// west's Lease is not there yet, so it stays a standby.
	setPod(ctx, t, west.namespace, west.pod, contract.PodRolePrimary, 2, west.endpoint(), east.pod+","+south.pod)
	annotatePod(ctx, t, west.namespace, west.pod, map[string]string{"dbfleet.io/promote-after-lsn": lsn})
	setPod(ctx, t, south.namespace, south.pod, contract.PodRoleReplica, 2, west.endpoint(), "")
	awaitStreamingFrom(ctx, t, west, south.pod)
	if st, err := west.status(ctx); err != nil || st.Role != contract.RoleStandby {
		t.Fatalf("west %+v (%v), want a standby still", st, err)
	}

	renew(t, west.namespace, decide.Holder("west", 2))
	west.waitStatus(ctx, t, "promoted at epoch 2", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Timeline == 2
	})
	execSQL(ctx, t, west, "INSERT INTO rows SELECT generate_series(101, 150)")
	south.waitStatus(ctx, t, "streaming from west on timeline 2", func(s contract.Status) bool {
		return s.Role == contract.RoleStandby && s.Streaming && s.Timeline == 2
	})
	waitRows(ctx, t, south, 150)
}

// awaitStreamingFrom waits until upstream's pg_stat_replication shows standby streaming from it.
func awaitStreamingFrom(ctx context.Context, t *testing.T, upstream *proc, standby string) {
	t.Helper()
	err := framework.WaitFor(ctx, time.Minute, standby+" streaming from "+upstream.pod, func(ctx context.Context) (bool, error) {
		conn, err := upstream.connect(ctx, superuser, superuser.password)
		if err != nil {
			return false, err
		}
		defer conn.Close(ctx)
		var n int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'", standby).Scan(&n)
		return n == 1, err
	})
	if err != nil {
		t.Fatal(err)
	}
}
