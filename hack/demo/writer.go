package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// The demo's client: it writes numbered rows through the database's read-write endpoint with the
// app credentials, as an application would, and keeps what the database acknowledged, so the
// demo can say when writes stopped and resumed, where they went, and whether every acknowledged
// row survived the failover. It follows status.endpoints.readWrite of the DatabaseCluster.

const (
	writeEvery   = 50 * time.Millisecond // 20 rows a second
	writeTimeout = 2 * time.Second
	writesTable  = "demo_writes"
	probesTable  = "demo_probes" // direct writes to one instance, kept apart from the acknowledged rows
)

// appCredentials are the app role's login, from the Secret <db>-app the hub created, and the
// database's CA from it, which the writer verifies the servers by.
type appCredentials struct {
	user, password, dbname string
	ca                     []byte
}

func (f *federation) appCredentials(ctx context.Context) (appCredentials, error) {
	s := &corev1.Secret{}
	if err := f.hub.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: demoDatabase + "-app"}, s); err != nil {
		return appCredentials{}, fmt.Errorf("the app credentials %s/%s-app: %w", demoNamespace, demoDatabase, err)
	}
	if len(s.Data["ca.crt"]) == 0 {
		return appCredentials{}, fmt.Errorf("the app credentials %s/%s-app have no ca.crt yet", demoNamespace, demoDatabase)
	}
	return appCredentials{user: string(s.Data["username"]), password: string(s.Data["password"]), dbname: string(s.Data["dbname"]),
		ca: s.Data["ca.crt"]}, nil
}

// connect opens a connection to host:port.
func (c appCredentials) connect(ctx context.Context, endpoint string) (*pgx.Conn, error) {
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
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = host, uint16(p), c.user, c.password, c.dbname
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.ca) {
		return nil, errors.New("no CA certificate to verify the server by")
	}
	// TLS, verify-full: the server's certificate, under the database's CA, names the database.
	cfg.TLSConfig = &tls.Config{RootCAs: roots, ServerName: contract.TLSServerName(demoDatabase, demoNamespace), MinVersion: tls.VersionTLS12}
	cfg.Fallbacks, cfg.ConnectTimeout = nil, writeTimeout
	return pgx.ConnectConfig(ctx, cfg)
}

// ack is one acknowledged row.
type ack struct {
	n        int64
	at       time.Time
	endpoint string
}

type writer struct {
	f     *federation
	creds appCredentials

	mu      sync.Mutex
	acks    []ack
	failed  int // attempts that were not acknowledged
	lastErr string
	stop    context.CancelFunc
	done    chan struct{}
}

// startWriter creates the table and starts writing.
func (f *federation) startWriter(ctx context.Context) (*writer, error) {
	creds, err := f.appCredentials(ctx)
	if err != nil {
		return nil, err
	}
	endpoint := f.readWriteEndpoint(ctx)
	if endpoint == "" {
		return nil, errors.New("the DatabaseCluster reports no read-write endpoint")
	}
	conn, err := creds.connect(ctx, endpoint)
	if err != nil {
		return nil, fmt.Errorf("connect to %s as %s: %w", endpoint, creds.user, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for _, table := range []string{writesTable, probesTable} {
		if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+table+" (n bigint PRIMARY KEY, written_at timestamptz NOT NULL DEFAULT now(), written_to text NOT NULL)"); err != nil {
			return nil, fmt.Errorf("create table %s: %w", table, err)
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	w := &writer{f: f, creds: creds, stop: cancel, done: make(chan struct{})}
	go w.run(wctx)
	return w, nil
}

// readWriteEndpoint is the DatabaseCluster's status.endpoints.readWrite, "" when it has none.
func (f *federation) readWriteEndpoint(ctx context.Context) string {
	db := &dbfleetv1alpha1.DatabaseCluster{}
	if err := f.hub.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: demoDatabase}, db); err != nil || db.Status.Endpoints == nil {
		return ""
	}
	return db.Status.Endpoints.ReadWrite
}

func (w *writer) run(ctx context.Context) {
	defer close(w.done)
	var (
		conn     *pgx.Conn
		endpoint string
		n        int64
	)
	defer func() {
		if conn != nil {
			_ = conn.Close(context.Background())
		}
	}()
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if conn == nil {
			endpoint = w.f.readWriteEndpoint(ctx)
			if endpoint == "" {
				w.fail(n+1, "no read-write endpoint")
				continue
			}
			c, err := w.creds.connect(ctx, endpoint)
			if err != nil {
				w.fail(n+1, err.Error())
				continue
			}
			conn = c
		}
		n++
		attempt, cancel := context.WithTimeout(ctx, writeTimeout)
		_, err := conn.Exec(attempt, "INSERT INTO "+writesTable+" (n, written_to) VALUES ($1, $2)", n, endpoint)
		cancel()
		if err != nil {
			w.fail(n, err.Error())
			_ = conn.Close(context.Background())
			conn = nil
			continue
		}
		w.mu.Lock()
		w.acks = append(w.acks, ack{n: n, at: time.Now(), endpoint: endpoint})
		w.mu.Unlock()
	}
}

func (w *writer) fail(_ int64, err string) {
	w.mu.Lock()
	w.failed++
	w.lastErr = err
	w.mu.Unlock()
}

// close stops the writer.
func (w *writer) close() {
	w.stop()
	<-w.done
}

// writeStats summarise the acknowledged rows.
type writeStats struct {
	acked        int
	lastAt       time.Time
	lastEndpoint string
	// firstAt is the first acknowledgement at each endpoint, lastAtEndpoint the last.
	firstAt, lastAtEndpoint map[string]time.Time
	failed                  int
	lastErr                 string
}

func (w *writer) stats() writeStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := writeStats{acked: len(w.acks), failed: w.failed, lastErr: w.lastErr, firstAt: map[string]time.Time{}, lastAtEndpoint: map[string]time.Time{}}
	for _, a := range w.acks {
		if _, ok := s.firstAt[a.endpoint]; !ok {
			s.firstAt[a.endpoint] = a.at
		}
		s.lastAtEndpoint[a.endpoint] = a.at
		s.lastAt, s.lastEndpoint = a.at, a.endpoint
	}
	return s
}

// acked are the numbers of the acknowledged rows.
func (w *writer) acked() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int64, len(w.acks))
	for i, a := range w.acks {
		out[i] = a.n
	}
	return out
}

// rowsAt counts the rows an instance holds (a standby answers read-only queries).
func (c appCredentials) rowsAt(ctx context.Context, endpoint string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	conn, err := c.connect(ctx, endpoint)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var rows int64
	err = conn.QueryRow(ctx, "SELECT count(*) FROM "+writesTable).Scan(&rows)
	return rows, err
}

// missingAt counts the acknowledged rows an instance does not hold.
func (c appCredentials) missingAt(ctx context.Context, endpoint string, acked []int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := c.connect(ctx, endpoint)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var missing int64
	err = conn.QueryRow(ctx, "SELECT count(*) FROM unnest($1::bigint[]) AS a(n) WHERE NOT EXISTS (SELECT 1 FROM "+writesTable+" w WHERE w.n = a.n)", acked).Scan(&missing)
	return missing, err
}

// probeWrite tries one write on an instance directly, bypassing the endpoint: nil means that
// instance accepted a write.
func (c appCredentials) probeWrite(ctx context.Context, endpoint string, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := c.connect(ctx, endpoint)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	_, err = conn.Exec(ctx, "INSERT INTO "+probesTable+" (n, written_to) VALUES ($1, $2)", n, endpoint)
	return err
}

// longestGap is the longest stretch after start without an acknowledged row, up to now, and
// when it began.
func (w *writer) longestGap(start time.Time) (time.Duration, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var longest time.Duration
	from, prev := start, start
	for _, a := range w.acks {
		if a.at.Before(start) {
			continue
		}
		if d := a.at.Sub(prev); d > longest {
			longest, from = d, prev
		}
		prev = a.at
	}
	if d := time.Since(prev); d > longest {
		longest, from = d, prev
	}
	return longest, from
}
