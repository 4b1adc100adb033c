package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// credentials are one role's login, as the hub's <db>-<kind> Secret gives them, with what a
// client verifies the server by (sslmode=verify-full): the database's CA and the name its
// certificate carries.
type credentials struct {
	user, password, dbname string
	ca                     []byte
	serverName             string
}

// appCredentials reads the hub's <db>-app Secret.
func (f *federation) appCredentials(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster) credentials {
	t.Helper()
	return f.login(t, dbc.Namespace, dbc.Name, dbfleetv1alpha1.CredentialsApp, "")
}

// login reads the hub's <db>-<kind> Secret and the database's CA (ca.crt of <db>-tls); dbname
// overrides the Secret's.
func (f *federation) login(t *testing.T, ns, db, kind, dbname string) credentials {
	t.Helper()
	ctx := context.Background()
	s, tls := &corev1.Secret{}, &corev1.Secret{}
	if err := f.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: db + "-" + kind}, s); err != nil {
		t.Fatal(err)
	}
	if err := f.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: db + "-tls"}, tls); err != nil {
		t.Fatal(err)
	}
	if dbname == "" {
		dbname = string(s.Data["dbname"])
	}
	return credentials{user: string(s.Data["username"]), password: string(s.Data["password"]), dbname: dbname,
		ca: tls.Data["ca.crt"], serverName: contract.TLSServerName(db, ns)}
}

// connect logs in at endpoint (host:port), giving up after timeout.
func (c credentials) connect(ctx context.Context, endpoint string, timeout time.Duration) (*pgx.Conn, error) {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		return nil, err
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port = host, uint16(p)
	cfg.User, cfg.Password, cfg.Database = c.user, c.password, c.dbname
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.ca) {
		return nil, errors.New("no CA certificate to verify the server by")
	}
	// verify-full: the server's certificate, under the database's CA, names the database.
	cfg.TLSConfig = &tls.Config{RootCAs: roots, ServerName: c.serverName, MinVersion: tls.VersionTLS12}
	cfg.Fallbacks, cfg.ConnectTimeout = nil, timeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return pgx.ConnectConfig(cctx, cfg)
}

// writerTable is the table the writer fills: n is unique across every writer, via says whether
// the row went through status.endpoints.readWrite or straight to one instance.
const writerTable = "CREATE TABLE writes (n bigint PRIMARY KEY, via text NOT NULL)"

// createWriterTable creates the writer's table through dbc's status.endpoints.readWrite with the
// app credentials, and returns them.
func (f *federation) createWriterTable(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster) credentials {
	t.Helper()
	ctx := context.Background()
	d, err := f.database(ctx, dbc)
	if err != nil {
		t.Fatal(err)
	}
	login := f.appCredentials(t, dbc)
	conn, err := login.connect(ctx, d.Status.Endpoints.ReadWrite, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, writerTable); err != nil {
		t.Fatal(err)
	}
	return login
}

// attemptTimeout bounds one write: a commit waiting for a synchronous standby, or a server that
// vanished, is given up on (its outcome unknown, so it is no acknowledgement) and the writer
// reconnects.
const attemptTimeout = 2 * time.Second

// fleetWriter is a client that keeps writing during a fault, on the test's one clock. One
// goroutine writes numbered rows through the DatabaseCluster's status.endpoints.readWrite at
// the pace's rate (re-reading the endpoint from the hub whenever its connection breaks), as an
// application would; and one goroutine per instance of the database (every pod of every member,
// found again every 2 s) tries a numbered write on that instance directly at its own rate (as
// fast as it answered, the writers starved the 2-core machine's real nodes). Every
// acknowledgement names the instance that committed it: the server's own address
// (inet_server_addr), mapped to its pod.
type fleetWriter struct {
	f      *federation
	dbc    *dbfleetv1alpha1.DatabaseCluster
	login  credentials
	pace   writerPace
	next   atomic.Int64
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	acks     []writeAck
	pods     map[string]string // pod IP → member/pod
	direct   map[string]bool   // pod IPs with a direct writer
	attempts int
}

// writeAck is one acknowledged write: row n, committed by instance (member/pod) between sent
// and at.
type writeAck struct {
	instance string
	n        int64
	via      string
	sent, at time.Time
}

// writerPace is how often a fleetWriter writes: at most one write per readWrite through the
// endpoint and per direct on each instance, and after a failed write or connection it waits
// retry before the next. A login is given login (a TLS handshake and a SCRAM exchange).
type writerPace struct {
	readWrite, direct, retry, login time.Duration
}

// faultPace is the fault tests' writer: a write gap measured to tens of milliseconds, so a login
// to an address a fault made unreachable is given up after attemptTimeout.
var faultPace = writerPace{readWrite: 10 * time.Millisecond, direct: 20 * time.Millisecond, retry: 50 * time.Millisecond, login: attemptTimeout}

// lightPace is a writer for benchmarks that run many databases at once: every standby refuses
// each direct write, and at faultPace the reconnections alone (a postgres backend forked and
// authenticated for each) held five databases' 2-core machine at a load average of 60. Its
// logins get 30 s, as connection pools give them (HikariCP's connectionTimeout, and libpq and
// pgx wait with no limit of their own): at a load average of 100 a TLS handshake and a SCRAM
// exchange took more than 2 s, and a writer that gave up after 2 s and tried again went 144 s
// without a connection to a primary that served everyone else, each abandoned login a backend
// forked for nobody.
var lightPace = writerPace{readWrite: 100 * time.Millisecond, direct: time.Second, retry: time.Second, login: 30 * time.Second}

// startWriter starts a writer at faultPace.
func (f *federation) startWriter(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster, login credentials) *fleetWriter {
	t.Helper()
	return f.startWriterAt(t, dbc, login, faultPace)
}

func (f *federation) startWriterAt(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster, login credentials, pace writerPace) *fleetWriter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &fleetWriter{f: f, dbc: dbc, login: login, pace: pace, cancel: cancel, pods: map[string]string{}, direct: map[string]bool{}}
	w.discover(ctx)
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		w.throughEndpoint(ctx)
	}()
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
				w.discover(ctx)
			}
		}
	}()
	t.Cleanup(w.stop)
	return w
}

// stop ends every writer and waits for them.
func (w *fleetWriter) stop() { w.cancel(); w.wg.Wait() }

// discover maps every pod of the database to its IP and starts a direct writer on each new IP.
func (w *fleetWriter) discover(ctx context.Context) {
	for _, m := range members {
		s, err := w.f.share(ctx, m, w.dbc.Namespace, w.dbc.Name)
		if err != nil {
			continue // a member being faulted: its pods are found again later
		}
		for _, p := range s.pods {
			ip := p.Status.PodIP
			if ip == "" {
				continue
			}
			w.mu.Lock()
			w.pods[ip] = m + "/" + p.Name
			start := !w.direct[ip]
			w.direct[ip] = true
			w.mu.Unlock()
			if start {
				w.wg.Add(1)
				go func() {
					defer w.wg.Done()
					w.write(ctx, func(context.Context) string { return net.JoinHostPort(ip, "5432") }, "direct", w.pace.direct)
				}()
			}
		}
	}
}

func (w *fleetWriter) throughEndpoint(ctx context.Context) {
	w.write(ctx, func(ctx context.Context) string {
		d, err := w.f.database(ctx, w.dbc)
		if err != nil || d.Status.Endpoints == nil {
			return ""
		}
		return d.Status.Endpoints.ReadWrite
	}, "readWrite", w.pace.readWrite)
}

// write inserts numbered rows at the endpoint it is given, at most one per every, reconnecting
// (and asking for the endpoint again) pace.retry after any failure.
func (w *fleetWriter) write(ctx context.Context, endpoint func(context.Context) string, via string, every time.Duration) {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	pause := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d):
		}
	}
	for ctx.Err() == nil {
		if conn == nil {
			e := endpoint(ctx)
			if e == "" {
				pause(max(w.pace.retry, 100*time.Millisecond))
				continue
			}
			c, err := w.login.connect(ctx, e, w.pace.login)
			if err != nil {
				pause(max(w.pace.retry, 100*time.Millisecond))
				continue
			}
			conn = c
		}
		n := w.next.Add(1)
		sent := time.Now()
		wctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		var server string
		err := conn.QueryRow(wctx, "INSERT INTO writes (n, via) VALUES ($1, $2) RETURNING host(inet_server_addr())", n, via).Scan(&server)
		cancel()
		at := time.Now()
		w.mu.Lock()
		w.attempts++
		if err == nil {
			instance, ok := w.pods[server]
			if !ok {
				instance = "unknown pod at " + server
			}
			w.acks = append(w.acks, writeAck{instance: instance, n: n, via: via, sent: sent, at: at})
		}
		w.mu.Unlock()
		if err != nil {
			if !readOnly(err) {
				// A standby's refusal leaves the connection good: reconnecting for each try
				// (a backend forked and authenticated each time) was most of the writers' load.
				_ = conn.Close(context.Background())
				conn = nil
			}
			pause(w.pace.retry)
			continue
		}
		if every > 0 {
			pause(every - time.Since(sent))
		}
	}
}

// readOnly says err is a standby's refusal of a write (read_only_sql_transaction).
func readOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "25006"
}

// acked is a copy of every acknowledgement so far.
func (w *fleetWriter) acked() []writeAck {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acks)
}

// ackedBy counts the acknowledgements instance gave.
func (w *fleetWriter) ackedBy(instance string) int {
	n := 0
	for _, a := range w.acked() {
		if a.instance == instance {
			n++
		}
	}
	return n
}

// awaitAcks waits until instance has acknowledged n more writes than it had when called.
func (w *fleetWriter) awaitAcks(t *testing.T, instance string, n int, timeout time.Duration) {
	t.Helper()
	want := w.ackedBy(instance) + n
	await(t, timeout, fmt.Sprintf("%d writes acknowledged by %s", want, instance), func(context.Context) (bool, error) {
		return w.ackedBy(instance) >= want, nil
	})
}

// writeWindow is when one instance accepted writes: from the sending of its first acknowledged
// write to the acknowledgement of its last (wider than the commits themselves, so disjoint
// windows mean disjoint commits).
type writeWindow struct {
	instance string
	from, to time.Time
	n        int
}

// checkWindows fails the test when two instances accepted writes in overlapping windows (two
// primaries at once, as a client saw them) and logs every window.
func (w *fleetWriter) checkWindows(t *testing.T, start time.Time) {
	t.Helper()
	by := map[string]*writeWindow{}
	for _, a := range w.acked() {
		win := by[a.instance]
		if win == nil {
			win = &writeWindow{instance: a.instance, from: a.sent, to: a.at}
			by[a.instance] = win
		}
		win.from, win.to = minTime(win.from, a.sent), maxTime(win.to, a.at)
		win.n++
	}
	var wins []writeWindow
	for _, win := range by {
		wins = append(wins, *win)
	}
	sort.Slice(wins, func(i, j int) bool { return wins[i].from.Before(wins[j].from) })
	var lines []string
	for _, win := range wins {
		lines = append(lines, fmt.Sprintf("%s: %d writes acknowledged from %+.3fs to %+.3fs", win.instance, win.n,
			win.from.Sub(start).Seconds(), win.to.Sub(start).Seconds()))
	}
	t.Logf("write windows (from the fault):\n%s", strings.Join(lines, "\n"))
	for i := 1; i < len(wins); i++ {
		if prev := wins[i-1]; !prev.to.Before(wins[i].from) {
			t.Errorf("%s and %s accepted writes in overlapping windows: %s until %+.3fs, %s from %+.3fs",
				prev.instance, wins[i].instance, prev.instance, prev.to.Sub(start).Seconds(), wins[i].instance, wins[i].from.Sub(start).Seconds())
		}
	}
}

// gap is the longest time after start in which no write was acknowledged, between
// acknowledgements (the client's write unavailability), and how many writes were tried in all.
func (w *fleetWriter) gap(start time.Time) (longest time.Duration, from time.Time, attempts int) {
	return w.gapUntil(start, time.Time{})
}

// gapUntil is gap, counting also the stretch from the last acknowledgement to end (zero: not).
func (w *fleetWriter) gapUntil(start, end time.Time) (longest time.Duration, from time.Time, attempts int) {
	acks := w.acked()
	sort.Slice(acks, func(i, j int) bool { return acks[i].at.Before(acks[j].at) })
	for i := 1; i < len(acks); i++ {
		if acks[i].at.Before(start) {
			continue
		}
		if d := acks[i].at.Sub(maxTime(acks[i-1].at, start)); d > longest {
			longest, from = d, acks[i-1].at
		}
	}
	if n := len(acks); !end.IsZero() && n > 0 {
		if d := end.Sub(maxTime(acks[n-1].at, start)); d > longest {
			longest, from = d, acks[n-1].at
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return longest, from, w.attempts
}

// missingOn are the acknowledged rows that the instance at endpoint does not have.
func (w *fleetWriter) missingOn(ctx context.Context, endpoint string) ([]int64, error) {
	conn, err := w.login.connect(ctx, endpoint, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, "SELECT n FROM writes")
	if err != nil {
		return nil, err
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	present := make(map[int64]bool, len(have))
	for _, n := range have {
		present[n] = true
	}
	var missing []int64
	for _, a := range w.acked() {
		if !present[a.n] {
			missing = append(missing, a.n)
		}
	}
	return missing, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
