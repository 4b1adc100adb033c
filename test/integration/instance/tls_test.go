package instance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/pkg/certs"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestTLSOnEveryConnection: a primary refuses plaintext from the network whoever asks, takes
// TLS verified under the database's CA, and takes the replication role only with its client
// certificate; a standby whose Secret holds another CA does not clone or stream (it cannot verify
// the primary) and says so, and does once its Secret is fixed, without a restart; replication
// runs over TLS; and new certificates are taken up by a reload, the primary's postmaster never
// restarted and no acknowledged write lost.
func TestTLSOnEveryConnection(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"tls-east", "tls-west"} {
		createNamespace(ctx, t, ns)
	}
	east := newProc(ctx, t, "tls-east-0", "tls-east", "east")
	west := newProc(ctx, t, "tls-west-0", "tls-west", "west")
	// west's Secret comes from another CA, as if copied from another database.
	writeTLSFiles(t, west.secrets[3], mustCA("another database's CA"))
	createPod(ctx, t, east.namespace, east.pod, contract.PodRolePrimary, 1, east.endpoint(), west.pod)
	createPod(ctx, t, west.namespace, west.pod, contract.PodRoleReplica, 1, east.endpoint(), "")
	renew(t, east.namespace, decide.Holder("east", 1))
	east.start(t)
	east.waitStatus(ctx, t, "primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	execSQL(ctx, t, east, "CREATE TABLE rows (n bigint PRIMARY KEY)")

	t.Run("plaintext is refused from the network", func(t *testing.T) {
		for _, s := range []secret{app, replication} {
			cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=postgres sslmode=disable connect_timeout=5",
				east.pgPort, s.username, s.password))
			if err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err == nil {
				conn.Close(ctx)
				t.Fatalf("%s logged in without TLS", s.username)
			}
			if !strings.Contains(err.Error(), "no encryption") {
				t.Errorf("%s without TLS: %v, want refused by pg_hba.conf (no encryption)", s.username, err)
			}
		}
	})

	t.Run("TLS verified under the CA", func(t *testing.T) {
		conn, err := east.connect(ctx, app, app.password)
		if err != nil {
			t.Fatalf("app over TLS, verify-full: %v", err)
		}
		defer conn.Close(ctx)
		var ssl bool
		if err := conn.QueryRow(ctx, "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil || !ssl {
			t.Errorf("pg_stat_ssl of this connection: ssl=%v, %v", ssl, err)
		}
	})

	t.Run("the replication role needs its client certificate", func(t *testing.T) {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=postgres connect_timeout=5",
			east.pgPort, replication.username, replication.password))
		if err != nil {
			t.Fatal(err)
		}
		withCert, err := east.clientTLS(replication)
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLSConfig, cfg.Fallbacks = withCert.Clone(), nil
		cfg.TLSConfig.Certificates = nil
		if conn, err := pgx.ConnectConfig(ctx, cfg); err == nil {
			conn.Close(ctx)
			t.Fatal("the replication role logged in without a client certificate")
		} else if !strings.Contains(err.Error(), "certificate") {
			t.Errorf("without a client certificate: %v", err)
		}
		conn, err := east.connect(ctx, replication, replication.password)
		if err != nil {
			t.Fatalf("with its client certificate: %v", err)
		}
		conn.Close(ctx)
	})

	t.Run("the status port speaks HTTPS and /status answers the agent alone", func(t *testing.T) {
		base := fmt.Sprintf("127.0.0.1:%d", east.httpPort)
		get := func(c *http.Client, url string) (int, string, error) {
			resp, err := c.Get(url)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body), err
		}
		// Plain HTTP: no status, whatever the path.
		if code, body, err := get(http.DefaultClient, "http://"+base+contract.Path); err == nil && (code == http.StatusOK || strings.Contains(body, `"role"`)) {
			t.Errorf("plain HTTP /status: %d %q, want no answer", code, body)
		}
		// The kubelet's probes: HTTPS, no client certificate, nothing verified.
		for _, path := range []string{contract.HealthPath, contract.ReadyPath} {
			if code, body, err := get(probeClient, "https://"+base+path); err != nil || code != http.StatusOK {
				t.Errorf("%s as the kubelet probes it: %d %q %v, want 200", path, code, body, err)
			}
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(testCA().Cert)
		as := func(pair *certs.Pair) *http.Client {
			cfg := &tls.Config{ServerName: "127.0.0.1", RootCAs: roots, MinVersion: tls.VersionTLS12}
			if pair != nil {
				c, err := tls.X509KeyPair(pair.Cert, pair.Key)
				if err != nil {
					t.Fatal(err)
				}
				cfg.Certificates = []tls.Certificate{c}
			}
			return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
		}
		issue := func(ca certs.Pair, cn string) *certs.Pair {
			pair, err := certs.Issue(ca, certs.Request{CommonName: cn, Usage: certs.Client}, time.Now(), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return &pair
		}
		for name, c := range map[string]*http.Client{
			"no client certificate":              as(nil),
			"the replication role's certificate": as(issue(testCA(), replication.username)),
			"the agent's name from another CA":   as(issue(mustCA("not the database's CA"), contract.StatusClientName)),
		} {
			code, body, err := get(c, "https://"+base+contract.Path)
			if err == nil && (code == http.StatusOK || strings.Contains(body, `"role"`)) {
				t.Errorf("/status with %s: %d %q, want refused", name, code, body)
			}
			t.Logf("/status with %s: %d %q %v", name, code, strings.TrimSpace(body), err)
		}
		code, body, err := get(as(issue(testCA(), contract.StatusClientName)), "https://"+base+contract.Path)
		if err != nil || code != http.StatusOK || !strings.Contains(body, `"role":"primary"`) {
			t.Errorf("/status with the agent's certificate: %d %q %v, want the primary's status", code, body, err)
		}
	})

	t.Run("a standby with another CA does not stream, and does once its Secret is fixed", func(t *testing.T) {
		west.start(t)
		west.waitStatus(ctx, t, "refusing the primary's certificate", func(s contract.Status) bool {
			return strings.Contains(s.Message, "certificate verify failed") || strings.Contains(s.Message, "certificate signed by unknown authority")
		})
		pid, err := west.postmasterPID()
		if err == nil {
			t.Fatalf("west runs postgres (pid %d) without having cloned", pid)
		}
		writeTLSFiles(t, west.secrets[3], testCA())
		west.waitStatus(ctx, t, "streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })
		su, err := east.connect(ctx, superuser, superuser.password)
		if err != nil {
			t.Fatal(err)
		}
		defer su.Close(ctx)
		var ssl bool
		if err := su.QueryRow(ctx, "SELECT s.ssl FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid) WHERE r.application_name = $1",
			west.pod).Scan(&ssl); err != nil || !ssl {
			t.Errorf("west's walsender: ssl=%v, %v", ssl, err)
		}
	})

	t.Run("certificates rotate without a restart or a lost write", func(t *testing.T) {
		before := servedCert(ctx, t, east)
		pid, err := east.postmasterPID()
		if err != nil {
			t.Fatal(err)
		}
		w := startMultiWriter(t, east)
		w.waitAcks(ctx, t, east.pod, 50)
		writeTLSFiles(t, east.secrets[3], testCA())
		writeTLSFiles(t, west.secrets[3], testCA())
		if err := framework.WaitFor(ctx, waitTimeout, "east serving its new certificate", func(context.Context) (bool, error) {
			return servedCert(ctx, t, east) != before, nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := framework.WaitFor(ctx, waitTimeout, "east's status port serving the new certificate", func(context.Context) (bool, error) {
			return servedHTTPSCert(t, east) == servedCert(ctx, t, east), nil
		}); err != nil {
			t.Error(err)
		}
		w.waitAcks(ctx, t, east.pod, 50)
		w.stop()
		if now, err := east.postmasterPID(); err != nil || now != pid {
			t.Errorf("east's postmaster: pid %d (%v), was %d: restarted", now, err, pid)
		}
		if missing := w.missingOn(ctx, t, east); len(missing) > 0 {
			t.Errorf("%d acknowledged writes missing on east: %v", len(missing), missing)
		}
		west.waitStatus(ctx, t, "still streaming", func(s contract.Status) bool { return s.Role == contract.RoleStandby && s.Streaming })
	})
}

// servedCert is the serial number of the certificate p's postgres shows a new connection.
func servedCert(ctx context.Context, t *testing.T, p *proc) string {
	t.Helper()
	conn, err := p.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tc, ok := conn.PgConn().Conn().(*tls.Conn)
	if !ok {
		t.Fatalf("the connection is %T, not TLS", conn.PgConn().Conn())
	}
	return tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// servedHTTPSCert is the serial number of the certificate p's status port shows a new connection.
func servedHTTPSCert(t *testing.T, p *proc) string {
	t.Helper()
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p.httpPort), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only its serial is read
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}
