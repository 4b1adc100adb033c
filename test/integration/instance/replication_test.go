package instance

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestPrimaryStandbyFailover walks one database through its life, each step building on the
// last: east-0 bootstraps as the first primary (cluster east, epoch 1), west-1 clones it and
// streams, rows cross, a wrong password is refused, a data directory of another database is
// refused, a crashed standby restarts in place; then east's Lease runs out (its agent stopped
// renewing) and east-0 fences before the deadline, west-1 is promoted at epoch 2 and takes
// writes, and a renewTime an hour in west-1's future fences it with ClockSkew.
func TestPrimaryStandbyFailover(t *testing.T) {
	ctx := context.Background()
	begin := time.Now()
	createNamespace(ctx, t, "east")
	createNamespace(ctx, t, "west")
	createNamespace(ctx, t, "south")

	// east-0 reaches the API server through a proxy that the fencing step cuts.
	apiServer, err := url.Parse(member.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := framework.StartProxy(apiServer.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	east := newProcVia(ctx, t, "east-0", "east", "east", proxy)
	west := newProc(ctx, t, "west-1", "west", "west")
	south := newProc(ctx, t, "south-3", "south", "south")
	// With the failsafe off: this follows the Lease alone, and a primary whose Lease is no longer
	// renewed or skewed stops at its deadline whatever it hears (failsafe_test.go has the failsafe).
	for _, p := range []*proc{east, west, south} {
		p.args = []string{"--failsafe=false"}
	}
	createPod(ctx, t, "east", east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod+","+south.pod)
	createPod(ctx, t, "west", west.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	createPod(ctx, t, "south", south.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	eastLease := renew(t, "east", decide.Holder("east", 1))
	var westLease *renewer
	top := t

	// Each step builds on the last: stop at the first that fails.
	step := func(name string, f func(t *testing.T)) {
		if !t.Run(name, f) {
			t.FailNow()
		}
	}
	var appConn *pgx.Conn
	t.Cleanup(func() {
		if appConn != nil {
			_ = appConn.Close(ctx)
		}
	})
	step("first primary bootstraps and takes writes", func(t *testing.T) {
		east.start(t)
		st := east.waitStatus(ctx, t, "primary and ready", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
		if st.Epoch != 1 || st.Timeline != 1 || st.SystemIdentifier == "" {
			t.Fatalf("status = %+v, want epoch 1, timeline 1 and a system identifier", st)
		}
		if ok, err := east.ready(ctx); err != nil || !ok {
			t.Fatalf("/readyz = %v, %v; want 200", ok, err)
		}
		var err error
		if appConn, err = east.connect(ctx, app, app.password); err != nil {
			t.Fatalf("connect as the app role: %v", err)
		}
		var owner string
		if err := appConn.QueryRow(ctx, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()").Scan(&owner); err != nil || owner != app.username {
			t.Fatalf("owner of database %s = %q (%v), want %q", app.dbname, owner, err, app.username)
		}
		if _, err := appConn.Exec(ctx, "CREATE TABLE rows (n int PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		if _, err := appConn.Exec(ctx, "INSERT INTO rows SELECT generate_series(1, 100)"); err != nil {
			t.Fatal(err)
		}
		var checksums string
		if err := appConn.QueryRow(ctx, "SHOW data_checksums").Scan(&checksums); err != nil || checksums != "on" {
			t.Fatalf("data_checksums = %q (%v), want on", checksums, err)
		}
	})

	step("wrong password is refused", func(t *testing.T) {
		for _, s := range []secret{app, superuser} {
			conn, err := east.connect(ctx, s, "not-"+s.password)
			if err == nil {
				_ = conn.Close(ctx)
				t.Fatalf("%s logged in with a wrong password", s.username)
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "28P01" {
				t.Fatalf("%s with a wrong password: %v, want SQLSTATE 28P01 (invalid_password)", s.username, err)
			}
		}
	})

	step("standby clones, streams and receives rows", func(t *testing.T) {
		west.start(t)
		st := west.waitStatus(ctx, t, "streaming standby", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Ready && s.Streaming })
		primary, _ := east.status(ctx)
		if st.SystemIdentifier != primary.SystemIdentifier {
			t.Fatalf("standby system identifier %s, primary's %s", st.SystemIdentifier, primary.SystemIdentifier)
		}
		super, err := east.connect(ctx, superuser, superuser.password)
		if err != nil {
			t.Fatal(err)
		}
		defer super.Close(ctx)
		var state, slot string
		var active bool
		if err := super.QueryRow(ctx, `SELECT r.state, s.slot_name, s.active FROM pg_stat_replication r
			JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE r.application_name = $1`, west.pod).Scan(&state, &slot, &active); err != nil {
			t.Fatalf("pg_stat_replication on the primary has no %s on a slot: %v", west.pod, err)
		}
		if state != "streaming" || slot != pgconf.SlotName(west.pod) || !active {
			t.Fatalf("replication of %s: state %q slot %q active %v", west.pod, state, slot, active)
		}
		if _, err := appConn.Exec(ctx, "INSERT INTO rows SELECT generate_series(101, 200)"); err != nil {
			t.Fatal(err)
		}
		waitRows(ctx, t, west, 200)
		standby, err := west.connect(ctx, app, app.password)
		if err != nil {
			t.Fatal(err)
		}
		defer standby.Close(ctx)
		if _, err := standby.Exec(ctx, "INSERT INTO rows VALUES (0)"); err == nil {
			t.Fatal("the standby took a write")
		}
	})

	step("a second standby clones and streams", func(t *testing.T) {
		south.start(t)
		south.waitStatus(ctx, t, "streaming standby", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })
		waitRows(ctx, t, south, 200)
	})

	step("data directory of another database is refused and kept", func(t *testing.T) {
		other := newProc(ctx, t, "west-2", "west", "west")
		initdbElsewhere(t, other.dataDir())
		createPod(ctx, t, "west", other.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
		other.start(t)
		other.waitStatus(ctx, t, "refusing the data directory", func(s contract.Status) bool {
			return s.Reason == contract.ReasonSystemIdentifierMismatch && s.Role == contract.RoleStopped
		})
		if _, err := os.Stat(filepath.Join(other.dataDir(), pgconf.VersionFile)); err != nil {
			t.Fatalf("the refused data directory is gone: %v", err)
		}
	})

	step("crashed standby restarts in place without a re-clone", func(t *testing.T) {
		marker := filepath.Join(west.dataDir(), "test-marker")
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		pid, err := west.postmasterPID()
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		st := west.waitStatus(ctx, t, "streaming again under a new postmaster", func(s contract.Status) bool {
			newPID, err := west.postmasterPID()
			return err == nil && newPID != pid && s.Role == contract.RoleStandby && s.Streaming
		})
		if st.Restarts != 1 {
			t.Errorf("status restarts = %d, want 1", st.Restarts)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the data directory was replaced (re-cloned): %v", err)
		}
		if _, err := appConn.Exec(ctx, "INSERT INTO rows SELECT generate_series(201, 300)"); err != nil {
			t.Fatal(err)
		}
		waitRows(ctx, t, west, 300)
	})

	var lastRenewed time.Time
	// A client writes to all three directly from here until west-1 takes writes (top's cleanup
	// stops it should a step fail first).
	everywhere := startMultiWriter(top, east, west, south)
	step("old primary, cut from its API server, fences before its Lease runs out", func(t *testing.T) {
		w := startWriter(ctx, t, east)
		waitWrites(t, w, 10)
		eastLease.stop() // the agent stops renewing: it lost the hub
		lease := getLease(ctx, t, "east")
		lastRenewed = lease.Spec.RenewTime.Time
		expiry := lastRenewed.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
		// And east-0 cannot read the API server any more: it fences at the last deadline it knew.
		proxy.Partition()
		east.waitStatus(ctx, t, "fenced", func(s contract.Status) bool { return s.Role == contract.RoleFenced })
		w.stop()
		last, n := w.lastSuccess()
		if deadline := expiry.Add(-contract.FenceSafety); !last.Before(deadline) {
			t.Fatalf("east-0 acknowledged a write at %s, not before the Lease expiry minus fenceSafety (%s)", last.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano))
		}
		t.Logf("last of %d writes acknowledged %s before the Lease expiry", n, expiry.Sub(last))
		// Its standbys lose their primary and say why, not only that they do not stream.
		// (While east-0's postgres shuts down the error may be a reset; once it is down, refused.)
		south.waitStatus(ctx, t, "PrimaryUnreachable naming the endpoint and connection refused", func(s contract.Status) bool {
			return s.Role == contract.RoleStandby && !s.Ready && s.Reason == contract.ReasonPrimaryUnreachable &&
				strings.Contains(s.Message, east.endpoint()) && strings.Contains(s.Message, "refused")
		})
		if conn, err := east.connect(ctx, app, app.password); err == nil {
			_, err = conn.Exec(ctx, "INSERT INTO rows VALUES (-1)")
			_ = conn.Close(ctx)
			if err == nil {
				t.Fatal("the fenced primary took a write")
			}
		}
	})

	step("standby promoted at epoch 2 takes writes", func(t *testing.T) {
		setPod(ctx, t, "west", west.pod, contract.PodRolePrimary, 2, west.endpoint(), south.pod)
		// Renewed for the rest of the test, not only this step (a subtest's cleanup would stop it).
		westLease = renew(top, "west", decide.Holder("west", 2))
		st := west.waitStatus(ctx, t, "primary and ready", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
		if st.Epoch != 2 || st.PromotedEpoch != 2 || st.Timeline != 2 {
			t.Fatalf("status = %+v, want epoch 2, promoted at 2, timeline 2", st)
		}
		conn, err := west.connect(ctx, app, app.password)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "INSERT INTO rows SELECT generate_series(100001, 100100)"); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM rows WHERE n BETWEEN 1 AND 300").Scan(&n); err != nil || n != 300 {
			t.Fatalf("the new primary has %d of the first 300 rows (%v)", n, err)
		}
		// Never two primaries, as a client writing to every instance sees it; asynchronous
		// replication may lose what east-0 acknowledged last: counted, not failed.
		everywhere.waitAcks(ctx, t, west.pod, 50)
		everywhere.stop()
		wins := everywhere.checkNoOverlap(t, begin)
		if len(wins) != 2 || wins[0].pod != east.pod || wins[1].pod != west.pod {
			t.Fatalf("write windows %+v, want east-0's, then west-1's", wins)
		}
		lost := everywhere.missingOn(ctx, t, west)
		t.Logf("asynchronous replication: %d of the %d rows east-0 acknowledged are not on west-1", len(lost), wins[0].n)
		if s, _ := east.status(ctx); s.Role != contract.RoleFenced {
			t.Fatalf("east-0 is %s, want still fenced", s.Role)
		}
	})

	step("a standby re-points to the new primary without a restart", func(t *testing.T) {
		pid, err := south.postmasterPID()
		if err != nil {
			t.Fatal(err)
		}
		setPod(ctx, t, "south", south.pod, contract.PodRoleReplica, 2, west.endpoint(), "")
		super, err := west.connect(ctx, superuser, superuser.password)
		if err != nil {
			t.Fatal(err)
		}
		defer super.Close(ctx)
		south.waitStatus(ctx, t, "streaming from the new primary", func(s contract.Status) bool {
			var state string
			err := super.QueryRow(ctx, "SELECT state FROM pg_stat_replication WHERE application_name = $1", south.pod).Scan(&state)
			return err == nil && state == "streaming" && s.Streaming && s.Timeline == 2
		})
		waitSameRows(ctx, t, west, south)
		if now, err := south.postmasterPID(); err != nil || now != pid {
			t.Fatalf("south-3's postmaster is %d (%v), was %d: re-pointing restarted postgres", now, err, pid)
		}
	})

	step("edited Secrets take effect without a restart", func(t *testing.T) {
		pids := map[*proc]int{}
		for _, p := range []*proc{west, south} {
			pid, err := p.postmasterPID()
			if err != nil {
				t.Fatal(err)
			}
			pids[p] = pid
		}
		receiverPID := func(password string) int {
			conn, err := south.connect(ctx, superuser, password)
			if err != nil {
				return 0
			}
			defer conn.Close(ctx)
			var pid int
			_ = conn.QueryRow(ctx, "SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'").Scan(&pid)
			return pid
		}
		oldReceiver := receiverPID(superuser.password)
		if oldReceiver == 0 {
			t.Fatal("south-3 has no streaming walreceiver")
		}
		oldApp := app.password
		// A server that logs every statement (a DBA's log_statement = 'all') logs no password.
		logAll, err := west.connect(ctx, superuser, superuser.password)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"ALTER SYSTEM SET log_statement = 'all'", "SELECT pg_reload_conf()"} {
			if _, err := logAll.Exec(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		logAll.Close(ctx)
		superuser.password, replication.password, app.password = "super-secret-2", "repl-secret-2", "app-secret-2"
		// As the kubelet does when a mounted Secret changes: every instance's files, in place.
		for _, p := range []*proc{east, west, south} {
			for i, s := range []secret{superuser, replication, app} {
				rewriteFile(t, filepath.Join(p.secrets[i], contract.SecretKeyPassword), s.password)
			}
		}
		west.waitStatus(ctx, t, "the new app password logs in", func(contract.Status) bool {
			conn, err := west.connect(ctx, app, app.password)
			if err != nil {
				return false
			}
			_ = conn.Close(ctx)
			return true
		})
		if conn, err := west.connect(ctx, app, oldApp); err == nil {
			_ = conn.Close(ctx)
			t.Fatal("the old app password still logs in")
		}
		super, err := west.connect(ctx, superuser, superuser.password)
		if err != nil {
			t.Fatalf("the new superuser password does not log in: %v", err)
		}
		defer super.Close(ctx)
		var stored string
		if err := super.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", app.username).Scan(&stored); err != nil ||
			!strings.HasPrefix(stored, "SCRAM-SHA-256$4096:") {
			t.Errorf("the app role's password is stored as %.20q (%v), want a SCRAM verifier", stored, err)
		}
		// The standby reconnects with the new replication password and keeps every row coming.
		// (A walreceiver logged in before the change stays connected: a new one proves the new
		// password, which is all the primary accepts now.)
		south.waitStatus(ctx, t, "a new walreceiver streaming with the new replication password", func(s contract.Status) bool {
			var state string
			err := super.QueryRow(ctx, "SELECT state FROM pg_stat_replication WHERE application_name = $1", south.pod).Scan(&state)
			if err != nil || state != "streaming" || !s.Streaming || s.Reason != "" {
				return false
			}
			pid := receiverPID(superuser.password)
			return pid != 0 && pid != oldReceiver
		})
		// Every instance has acted on the new passwords (the standby reloaded its
		// primary_conninfo): none of them is in any log.
		for _, p := range []*proc{east, west, south} {
			out, err := os.ReadFile(p.log.Name()) // the manager's log and postgres' (its stderr)
			if err != nil {
				t.Fatal(err)
			}
			for _, password := range []string{superuser.password, replication.password, app.password} {
				if strings.Contains(string(out), password) {
					t.Errorf("%s's log holds a password", p.pod)
				}
			}
		}
		conn, err := west.connect(ctx, app, app.password)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "INSERT INTO rows SELECT generate_series(200001, 200050)"); err != nil {
			t.Fatal(err)
		}
		waitSameRows(ctx, t, west, south)
		for p, pid := range pids {
			if now, err := p.postmasterPID(); err != nil || now != pid {
				t.Fatalf("%s's postmaster is %d (%v), was %d: the new credentials restarted postgres", p.pod, now, err, pid)
			}
		}
	})

	step("a Secret that cannot be read keeps the credentials in use and says so", func(t *testing.T) {
		path := filepath.Join(south.secrets[1], contract.SecretKeyPassword)
		rewriteFile(t, path, "")
		south.waitStatus(ctx, t, "CredentialsInvalid", func(s contract.Status) bool {
			return s.Reason == contract.ReasonCredentialsInvalid && s.Streaming
		})
		// A quote is refused too, and the message never shows the value.
		rewriteFile(t, path, "it's-"+replication.password)
		south.waitStatus(ctx, t, "CredentialsInvalid for a quote", func(s contract.Status) bool {
			return s.Reason == contract.ReasonCredentialsInvalid && s.Streaming && strings.Contains(s.Message, "holds a quote")
		})
		if st, err := south.status(ctx); err == nil && strings.Contains(st.Message, replication.password) {
			t.Errorf("the status shows the password: %s", st.Message)
		}
		rewriteFile(t, path, replication.password)
		south.waitStatus(ctx, t, "the reason cleared", func(s contract.Status) bool {
			return s.Reason == "" && s.Streaming
		})
	})

	step("old primary stays fenced when its Lease is renewed again at its epoch", func(t *testing.T) {
		// east's agent comes back and renews at epoch 1; east-0 sees the API server again.
		renew(t, "east", decide.Holder("east", 1))
		proxy.Heal()
		st := east.waitStatus(ctx, t, "seeing the renewed Lease", func(s contract.Status) bool {
			seen, err := time.Parse(time.RFC3339Nano, s.LeaseRenewTime)
			return err == nil && seen.After(lastRenewed)
		})
		if st.Role != contract.RoleFenced {
			t.Fatalf("east-0 under a renewed Lease at epoch 1 is %s, want fenced until a higher epoch", st.Role)
		}
		if conn, err := east.connect(ctx, app, app.password); err == nil {
			_, err = conn.Exec(ctx, "INSERT INTO rows VALUES (-3)")
			_ = conn.Close(ctx)
			if err == nil {
				t.Fatal("the fenced primary took a write under a renewed Lease at its old epoch")
			}
		}
	})

	step("renewTime far in the future fences with ClockSkew", func(t *testing.T) {
		// The west agent's clock runs an hour ahead.
		if westLease == nil {
			t.Fatal("west-1 was not promoted")
		}
		westLease.stop()
		lease := getLease(ctx, t, "west")
		future := metav1.NewMicroTime(time.Now().Add(time.Hour))
		lease.Spec.RenewTime = &future
		if err := member.Client.Update(ctx, lease); err != nil {
			t.Fatal(err)
		}
		west.waitStatus(ctx, t, "fenced for clock skew", func(s contract.Status) bool {
			return s.Role == contract.RoleFenced && s.Reason == contract.ReasonClockSkew
		})
		if conn, err := west.connect(ctx, app, app.password); err == nil {
			_, err = conn.Exec(ctx, "INSERT INTO rows VALUES (-2)")
			_ = conn.Close(ctx)
			if err == nil {
				t.Fatal("an instance under a skewed Lease took a write")
			}
		}
	})
}

func waitRows(ctx context.Context, t *testing.T, p *proc, want int) {
	t.Helper()
	var n int
	p.waitStatus(ctx, t, "has every row", func(contract.Status) bool {
		conn, err := p.connect(ctx, app, app.password)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		return conn.QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n) == nil && n == want
	})
}

// waitSameRows waits until standby has as many rows as primary has now.
func waitSameRows(ctx context.Context, t *testing.T, primary, standby *proc) {
	t.Helper()
	conn, err := primary.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM rows").Scan(&n); err != nil {
		t.Fatal(err)
	}
	waitRows(ctx, t, standby, n)
}

// writer inserts rows into one instance as fast as it can, noting when each was acknowledged.
type writer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	last time.Time
	n    int
}

func startWriter(ctx context.Context, t *testing.T, p *proc) *writer {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	w := &writer{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		}()
		for i := 1_000_000; ctx.Err() == nil; i++ {
			if conn == nil {
				c, err := p.connect(ctx, app, app.password)
				if err != nil {
					// Pace reconnection attempts to a server that is down.
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
					continue
				}
				conn = c
			}
			if _, err := conn.Exec(ctx, "INSERT INTO rows VALUES ($1)", i); err != nil {
				_ = conn.Close(context.Background())
				conn = nil
				continue
			}
			acked := time.Now()
			w.mu.Lock()
			w.last, w.n = acked, w.n+1
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *writer) stop() { w.cancel(); <-w.done }

func (w *writer) lastSuccess() (time.Time, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.n
}

func waitWrites(t *testing.T, w *writer, n int) {
	t.Helper()
	err := framework.WaitFor(context.Background(), waitTimeout, "writes", func(context.Context) (bool, error) {
		_, got := w.lastSuccess()
		return got >= n, nil
	})
	if err != nil {
		t.Fatalf("the writer did not get %d writes in: %v", n, err)
	}
}
