package instance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
)

// TestSynchronousReplication runs a primary in east with one synchronous standby in west.
// With dataDurability required, a commit waits while the standby is down (its backend waits in
// SyncRep, a client with a deadline gets no answer) and returns once the standby streams again;
// the primary says it is waiting and is not ready meanwhile. With preferred, the primary drops
// to asynchronous while the standby is down, says so, and commits return.
func TestSynchronousReplication(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"sync-east", "sync-west"} {
		createNamespace(ctx, t, ns)
	}
	east := newProc(ctx, t, "east-0", "sync-east", "east")
	west := newProc(ctx, t, "west-1", "sync-west", "west")
	createPod(ctx, t, "sync-east", east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod)
	annotatePod(ctx, t, "sync-east", east.pod, map[string]string{
		contract.AnnotationSynchronous:         contract.FormatSynchronous(contract.DurabilityRequired, 1),
		contract.AnnotationSynchronousStandbys: west.pod,
	})
	createPod(ctx, t, "sync-west", west.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	renew(t, "sync-east", decide.Holder("east", 1))

	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	super := func(t *testing.T) *pgx.Conn {
		t.Helper()
		conn, err := east.connect(ctx, superuser, superuser.password)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close(ctx) })
		return conn
	}
	synchronousWith := func(s contract.Status, pod string) bool {
		return s.Synchronous != nil && slices.Contains(s.Synchronous.Synchronous, pod)
	}

	step("the primary bootstraps waiting for its synchronous standby, which then confirms commits", func(t *testing.T) {
		east.start(t)
		// The roles are the manager's own writes: they do not wait, or no standby could clone.
		east.waitStatus(ctx, t, "primary waiting for a synchronous standby", func(s contract.Status) bool {
			return s.Role == contract.RolePrimary && !s.Ready && s.Reason == contract.ReasonWaitingForSynchronousStandbys &&
				s.Synchronous != nil && s.Synchronous.Waiting
		})
		west.start(t)
		// (pg_basebackup's WAL stream, named west-1-clone, never counts.)
		st := east.waitStatus(ctx, t, "west-1 synchronous", func(s contract.Status) bool {
			return s.Role == contract.RolePrimary && s.Ready && synchronousWith(s, west.pod) && !s.Synchronous.Waiting &&
				len(s.Replication) == 1
		})
		if sync := st.Synchronous; sync.StandbyNames != `ANY 1 ("west-1")` || sync.Number != 1 || sync.Durability != contract.DurabilityRequired {
			t.Fatalf("synchronous = %+v, want ANY 1 (\"west-1\") in effect, required", sync)
		}
		if r := st.Replication[0]; r.Pod != west.pod || r.SyncState != "quorum" || r.State != "streaming" {
			t.Fatalf("replication = %+v, want west-1 in quorum", st.Replication)
		}
		conn, err := east.connect(ctx, app, app.password)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE TABLE rows (n int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "INSERT INTO rows VALUES (1)"); err != nil {
			t.Fatal(err)
		}
	})

	step("required: a commit waits while the synchronous standby is down and returns once it is back", func(t *testing.T) {
		west.stop(t)
		east.waitStatus(ctx, t, "waiting for synchronous standbys", func(s contract.Status) bool {
			return s.Role == contract.RolePrimary && !s.Ready && s.Reason == contract.ReasonWaitingForSynchronousStandbys && s.Synchronous.Waiting
		})
		conn, err := east.connect(ctx, app, app.password)
		if err != nil {
			t.Fatal(err)
		}
		var pid int
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := conn.Exec(context.Background(), "INSERT INTO rows VALUES (2)")
			done <- err
		}()
		s := super(t)
		east.waitStatus(ctx, t, "the commit waiting in SyncRep", func(contract.Status) bool {
			var event string
			err := s.QueryRow(ctx, "SELECT coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $1", pid).Scan(&event)
			return err == nil && event == "SyncRep"
		})
		select {
		case err := <-done:
			t.Fatalf("the commit returned (%v) with no synchronous standby streaming", err)
		default:
		}
		// A client with a deadline gets no answer.
		other, err := east.connect(ctx, app, app.password)
		if err != nil {
			t.Fatal(err)
		}
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = other.Exec(tctx, "INSERT INTO rows VALUES (3)")
		cancel()
		_ = other.Close(ctx)
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(tctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("a commit with a 2 s deadline returned %v, want no answer before the deadline", err)
		}

		west.start(t)
		waitDone(ctx, t, done, "the waiting commit")
		_ = conn.Close(ctx)
		east.waitStatus(ctx, t, "synchronous again", func(s contract.Status) bool {
			return s.Ready && s.Reason == "" && synchronousWith(s, west.pod)
		})
		waitRowsAtLeast(ctx, t, west, 2)
	})

	step("preferred: with the standby down the primary commits alone and says so", func(t *testing.T) {
		annotatePod(ctx, t, "sync-east", east.pod, map[string]string{
			contract.AnnotationSynchronous: contract.FormatSynchronous(contract.DurabilityPreferred, 1),
		})
		east.waitStatus(ctx, t, "preferred and synchronous", func(s contract.Status) bool {
			return s.Synchronous != nil && s.Synchronous.Durability == contract.DurabilityPreferred && synchronousWith(s, west.pod)
		})
		west.stop(t)
		st := east.waitStatus(ctx, t, "degraded to asynchronous", func(s contract.Status) bool {
			return s.Reason == contract.ReasonSynchronousDegraded && s.Ready && s.Synchronous.Degraded && s.Synchronous.StandbyNames == ""
		})
		if st.Synchronous.Number != 0 {
			t.Fatalf("synchronous = %+v, want number 0 in effect", st.Synchronous)
		}
		conn, err := east.connect(ctx, app, app.password)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := conn.Exec(context.Background(), "INSERT INTO rows VALUES (4)")
			done <- err
		}()
		waitDone(ctx, t, done, "a commit with the synchronous standby down")

		west.start(t)
		st = east.waitStatus(ctx, t, "synchronous again", func(s contract.Status) bool {
			return s.Reason == "" && synchronousWith(s, west.pod) && s.Synchronous.Number == 1
		})
		if st.Synchronous.StandbyNames != `ANY 1 ("west-1")` {
			t.Fatalf("synchronous_standby_names = %q, want ANY 1 (\"west-1\")", st.Synchronous.StandbyNames)
		}
		waitRowsAtLeast(ctx, t, west, 3)
	})
}

// waitDone waits for a commit started in the background to return without error.
func waitDone(ctx context.Context, t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("%s did not return within %s", what, waitTimeout)
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

func waitRowsAtLeast(ctx context.Context, t *testing.T, p *proc, want int) {
	t.Helper()
	var n int
	p.waitStatus(ctx, t, "has the rows", func(contract.Status) bool {
		conn, err := p.connect(ctx, app, app.password)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		return conn.QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n) == nil && n >= want
	})
}
