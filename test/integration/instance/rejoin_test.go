package instance

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
)

// divergedPair makes a failover in which the old primary took writes the new one never saw:
// oldPod (east, epoch 1) and its standby newPod (west) share rows 1-100; the standby stops,
// the old primary takes rows 101-200 alone and stops; the standby is promoted at epoch 2
// (timeline 2) and takes rows 1001-1050. It returns both, the old one stopped, its pod not yet
// told of epoch 2.
func divergedPair(ctx context.Context, t *testing.T, prefix, oldPod, newPod string) (old, next *proc) {
	t.Helper()
	eastNS, westNS := prefix+"-east", prefix+"-west"
	createNamespace(ctx, t, eastNS)
	createNamespace(ctx, t, westNS)
	old = newProc(ctx, t, oldPod, eastNS, "east")
	next = newProc(ctx, t, newPod, westNS, "west")
	createPod(ctx, t, eastNS, old.pod, contract.PodRolePrimary, 1, old.endpoint(), next.pod)
	createPod(ctx, t, westNS, next.pod, contract.PodRoleReplica, 1, old.endpoint(), "")
	oldLease := renew(t, eastNS, decide.Holder("east", 1))

	old.start(t)
	old.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	execSQL(ctx, t, old, "CREATE TABLE rows (n int PRIMARY KEY)", "INSERT INTO rows SELECT generate_series(1, 100)")
	next.start(t)
	next.waitStatus(ctx, t, "streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })
	waitRows(ctx, t, next, 100)

	next.stop(t)
	execSQL(ctx, t, old, "INSERT INTO rows SELECT generate_series(101, 200)")
	oldLease.stop()
	old.stop(t)

	setPod(ctx, t, westNS, next.pod, contract.PodRolePrimary, 2, next.endpoint(), old.pod)
	renew(t, westNS, decide.Holder("west", 2))
	next.start(t)
	next.waitStatus(ctx, t, "promoted at epoch 2", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Timeline == 2
	})
	execSQL(ctx, t, next, "INSERT INTO rows SELECT generate_series(1001, 1050)")
	return old, next
}

func execSQL(ctx context.Context, t *testing.T, p *proc, stmts ...string) {
	t.Helper()
	conn, err := p.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s on %s: %v", s, p.pod, err)
		}
	}
}

// haveTheNewPrimarysRows waits until the rejoined old primary has next's rows, then checks they
// are exactly 1-100 and 1001-1050: none of 101-200, which only the old primary had.
func haveTheNewPrimarysRows(ctx context.Context, t *testing.T, next, old *proc) {
	t.Helper()
	waitSameRows(ctx, t, next, old)
	conn, err := old.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var total, diverged int
	if err := conn.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE n BETWEEN 101 AND 200) FROM rows").Scan(&total, &diverged); err != nil {
		t.Fatal(err)
	}
	if total != 150 || diverged != 0 {
		t.Fatalf("the rejoined standby has %d rows, %d of them the old primary's own (101-200); want 150 and none", total, diverged)
	}
}

// rejoins hands the old primary epoch 2 as a standby of the new one and waits until it streams
// on timeline 2 with exactly the new primary's rows: 1-100 and 1001-1050, none of 101-200.
func rejoins(ctx context.Context, t *testing.T, old, next *proc, method string) contract.Status {
	t.Helper()
	setPod(ctx, t, old.namespace, old.pod, contract.PodRoleReplica, 2, next.endpoint(), "")
	old.start(t)
	st := old.waitStatus(ctx, t, "a streaming standby on timeline 2, rejoined by "+method, func(s contract.Status) bool {
		return s.Role == contract.RoleStandby && s.Streaming && s.Timeline == 2 && s.Rejoin != nil && s.Rejoin.Method == method
	})
	haveTheNewPrimarysRows(ctx, t, next, old)
	if st.Rejoin.Epoch != 2 {
		t.Fatalf("rejoin %+v, want epoch 2", st.Rejoin)
	}
	return st
}

// A former primary handed a higher epoch as a standby rewinds (pg_rewind) and follows the new
// primary, with the new primary's rows and without its own diverged ones.
func TestFormerPrimaryRewindsAndFollowsTheNewPrimary(t *testing.T) {
	ctx := context.Background()
	old, next := divergedPair(ctx, t, "rewind", "east-0", "west-1")
	st := rejoins(ctx, t, old, next, contract.RejoinRewound)
	if len(st.Diverged) != 0 {
		t.Fatalf("diverged %v after a rewind, want none", st.Diverged)
	}
	if !strings.Contains(st.Rejoin.Message, "servers diverged at WAL location") {
		t.Fatalf("rejoin message %q, want pg_rewind's divergence point", st.Rejoin.Message)
	}
}

// When pg_rewind cannot work (the old primary's WAL since the fork is gone), the old data
// directory is kept, whole, as <volume>/pgdata.diverged-<epoch>, reported, and the instance clones
// the new primary afresh.
func TestFormerPrimaryThatCannotRewindKeepsItsDataAndClones(t *testing.T) {
	ctx := context.Background()
	old, next := divergedPair(ctx, t, "reclone", "east-2", "west-3")
	marker := filepath.Join(old.dataDir(), "test-marker")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	segment := regexp.MustCompile(`^[0-9A-F]{24}$`)
	walDir := filepath.Join(old.dataDir(), "pg_wal")
	entries, err := os.ReadDir(walDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if segment.MatchString(e.Name()) {
			if err := os.Remove(filepath.Join(walDir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := rejoins(ctx, t, old, next, contract.RejoinRecloned)
	aside := filepath.Join(old.volume, instance.DataDirName+".diverged-1")
	if st.Rejoin.DivergedData != aside || !slices.Contains(st.Diverged, aside) {
		t.Fatalf("rejoin %+v, diverged %v; want the old data directory kept as %s", st.Rejoin, st.Diverged, aside)
	}
	if _, err := os.Stat(filepath.Join(aside, "test-marker")); err != nil {
		t.Fatalf("the kept directory is not the old data directory: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the new data directory still has the old one's files: not a fresh clone")
	}
}

// A former primary whose replication role may not CHECKPOINT the new primary (as on PostgreSQL
// 14 and older, which have no pg_checkpoint role; here the grant is taken back) cannot be sure
// pg_rewind would see the new timeline: it keeps its directory aside and clones, rather than
// retry for ever or rewind as the superuser from another host.
func TestFormerPrimaryThatMayNotCheckpointKeepsItsDataAndClones(t *testing.T) {
	ctx := context.Background()
	old, next := divergedPair(ctx, t, "nockpt", "east-4", "west-5")
	conn, err := next.connect(ctx, superuser, superuser.password) // over loopback
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "REVOKE pg_checkpoint FROM "+replication.username); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	st := rejoins(ctx, t, old, next, contract.RejoinRecloned)
	if !strings.Contains(st.Rejoin.Message, "may not CHECKPOINT") {
		t.Errorf("rejoin message %q, want why it was not rewound", st.Rejoin.Message)
	}
	if aside := filepath.Join(old.volume, instance.DataDirName+".diverged-1"); st.Rejoin.DivergedData != aside {
		t.Errorf("rejoin %+v: want the old data directory kept as %s", st.Rejoin, aside)
	}
}

// A former primary pointed at a pod that does not run as primary yet (the hub names a promoted
// pod as the primary endpoint the moment it promotes it) waits for it: rewound against a standby
// still on the old timeline, pg_rewind would find "no rewind required" and the old primary would
// keep rows 101-200, which the new primary never had. Once the new primary runs, it rewinds.
func TestFormerPrimaryWaitsForItsNewPrimaryToRun(t *testing.T) {
	ctx := context.Background()
	eastNS, westNS := "early-east", "early-west"
	createNamespace(ctx, t, eastNS)
	createNamespace(ctx, t, westNS)
	old := newProc(ctx, t, "east-4", eastNS, "east")
	next := newProc(ctx, t, "west-5", westNS, "west")
	createPod(ctx, t, eastNS, old.pod, contract.PodRolePrimary, 1, old.endpoint(), next.pod)
	createPod(ctx, t, westNS, next.pod, contract.PodRoleReplica, 1, old.endpoint(), "")
	oldLease := renew(t, eastNS, decide.Holder("east", 1))
	old.start(t)
	old.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	execSQL(ctx, t, old, "CREATE TABLE rows (n int PRIMARY KEY)", "INSERT INTO rows SELECT generate_series(1, 100)")
	next.start(t)
	next.waitStatus(ctx, t, "streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })
	waitRows(ctx, t, next, 100)
	// next keeps running as a standby, but of nobody: rows 101-200 are the old primary's alone.
	setPod(ctx, t, westNS, next.pod, contract.PodRoleReplica, 1, "127.0.0.1:1", "")
	next.waitStatus(ctx, t, "a standby no longer streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && !s.Streaming })
	execSQL(ctx, t, old, "INSERT INTO rows SELECT generate_series(101, 200)")
	oldLease.stop()
	old.stop(t)

	// The hub has promoted next at epoch 2, but its Lease has not come yet: it stays a standby.
	setPod(ctx, t, westNS, next.pod, contract.PodRolePrimary, 2, next.endpoint(), old.pod)
	next.waitStatus(ctx, t, "a standby waiting for its Lease", func(s contract.Status) bool {
		return s.Role == contract.RoleStandby && s.Epoch == 2
	})
	setPod(ctx, t, eastNS, old.pod, contract.PodRoleReplica, 2, next.endpoint(), "")
	old.start(t)
	waiting := old.waitStatus(ctx, t, "waiting for the new primary to run", func(s contract.Status) bool {
		return strings.Contains(s.Message, "does not run as primary yet")
	})
	if waiting.Rejoin != nil {
		t.Fatalf("rejoined %+v against a standby", waiting.Rejoin)
	}

	renew(t, westNS, decide.Holder("west", 2))
	next.waitStatus(ctx, t, "promoted at epoch 2", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Timeline == 2
	})
	execSQL(ctx, t, next, "INSERT INTO rows SELECT generate_series(1001, 1050)")
	old.waitStatus(ctx, t, "a streaming standby on timeline 2, rewound", func(s contract.Status) bool {
		return s.Role == contract.RoleStandby && s.Streaming && s.Timeline == 2 && s.Rejoin != nil && s.Rejoin.Method == contract.RejoinRewound
	})
	haveTheNewPrimarysRows(ctx, t, next, old)
}
