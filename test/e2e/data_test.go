package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// TestRowsCrossClusters writes as a client would: it connects to the DatabaseCluster's
// status.endpoints.readWrite with the <db>-app credentials from the hub, inserts rows, reads them
// back on every readOnly endpoint (the standbys in the other two members, over routed pod IPs),
// and tries a write directly on every instance: exactly one of them, the primary, accepts it.
func TestRowsCrossClusters(t *testing.T) {
	fed.requireHealthy(t)
	const ns, rows = "data", 200
	fed.setUp(t, ns, evenly())
	dbc := withSuperuserFromNetwork(newDatabase(ns, "orders", 3, "central")) // it reads pg_stat_replication
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	ctx := context.Background()

	d, err := fed.database(ctx, dbc)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status.Endpoints == nil || d.Status.Endpoints.ReadWrite == "" || len(d.Status.Endpoints.ReadOnly) != 2 {
		t.Fatalf("status.endpoints %+v: want a readWrite endpoint and the two standbys", d.Status.Endpoints)
	}
	secret := &corev1.Secret{}
	if err := fed.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders-app"}, secret); err != nil {
		t.Fatal(err)
	}
	superuser := &corev1.Secret{}
	if err := fed.hub.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders-superuser"}, superuser); err != nil {
		t.Fatal(err)
	}
	// loginAs logs in with s's username and dbname and the given password (credentials.connect).
	loginAs := func(endpoint string, s *corev1.Secret, password string) (*pgx.Conn, error) {
		c := fed.login(t, ns, "orders", strings.TrimPrefix(s.Name, "orders-"), string(s.Data["dbname"]))
		c.password = password
		return c.connect(ctx, endpoint, 10*time.Second)
	}
	login := func(endpoint string) (*pgx.Conn, error) {
		return loginAs(endpoint, secret, string(secret.Data["password"]))
	}

	if conn, err := loginAs(d.Status.Endpoints.ReadWrite, secret, "not-the-password"); err == nil {
		_ = conn.Close(ctx)
		t.Errorf("a wrong password was accepted at %s", d.Status.Endpoints.ReadWrite)
	}

	primary, err := login(d.Status.Endpoints.ReadWrite)
	if err != nil {
		t.Fatalf("connect to readWrite %s with the app credentials: %v", d.Status.Endpoints.ReadWrite, err)
	}
	defer func() { _ = primary.Close(ctx) }()
	if _, err := primary.Exec(ctx, "CREATE TABLE crossing (n int PRIMARY KEY, probe text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := primary.Exec(ctx, "INSERT INTO crossing (n) SELECT generate_series(1, $1)", rows); err != nil {
		t.Fatal(err)
	}
	for _, standby := range d.Status.Endpoints.ReadOnly {
		await(t, time.Minute, fmt.Sprintf("%d rows on the standby %s", rows, standby), func(ctx context.Context) (bool, error) {
			conn, err := login(standby)
			if err != nil {
				return false, nil // not reachable yet: try again
			}
			defer func() { _ = conn.Close(ctx) }()
			var n int
			var recovery bool
			if err := conn.QueryRow(ctx, "SELECT count(*), pg_is_in_recovery() FROM crossing").Scan(&n, &recovery); err != nil {
				return false, nil // the table's creation not replayed yet
			}
			if !recovery {
				return false, fmt.Errorf("%s, a readOnly endpoint, is not in recovery", standby)
			}
			return n == rows, nil
		})
	}

	// The primary streams to a standby in each other member (seen as the superuser, over the
	// network as <db>-superuser allows).
	su, err := loginAs(d.Status.Endpoints.ReadWrite, superuser, string(superuser.Data["password"]))
	if err != nil {
		t.Fatalf("connect to %s as the superuser: %v", d.Status.Endpoints.ReadWrite, err)
	}
	var streaming int
	if err := su.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name NOT LIKE '%-clone'").Scan(&streaming); err != nil {
		t.Fatal(err)
	}
	if streaming != 2 {
		t.Errorf("pg_stat_replication on the primary: %d standbys streaming, want the two in west and east", streaming)
	}
	tlsAcrossClusters(ctx, t, d, su)
	_ = su.Close(ctx)

	// A write tried on every instance directly: exactly one accepts it.
	accepted := []string{}
	for _, endpoint := range append([]string{d.Status.Endpoints.ReadWrite}, d.Status.Endpoints.ReadOnly...) {
		conn, err := login(endpoint)
		if err != nil {
			t.Fatalf("connect to %s: %v", endpoint, err)
		}
		_, err = conn.Exec(ctx, "INSERT INTO crossing (n, probe) VALUES ($1, $2)", rows+1+len(accepted), endpoint)
		_ = conn.Close(ctx)
		if err == nil {
			accepted = append(accepted, endpoint)
		}
	}
	if len(accepted) != 1 || accepted[0] != d.Status.Endpoints.ReadWrite {
		t.Errorf("instances that accepted a direct write: %v; want only the primary %s", accepted, d.Status.Endpoints.ReadWrite)
	}
	if p := d.Status.Primary; p == nil || p.Cluster != "central" {
		t.Errorf("primary %+v, want central", d.Status.Primary)
	}
	t.Logf("%d rows written at %s and read on %v; only the primary accepted a direct write", rows, d.Status.Endpoints.ReadWrite, d.Status.Endpoints.ReadOnly)
}

// tlsAcrossClusters checks the TLS a client in another cluster meets: the standbys stream over
// TLS (pg_stat_ssl of their walsenders, read with su on the primary), plaintext is refused, and
// the primary's address verifies (sslmode=verify-full, the address as the host) under the CA of
// the <db>-app Secret in a member cluster that does not run the primary, once the hub has named
// that address in the certificate.
func tlsAcrossClusters(ctx context.Context, t *testing.T, d *dbfleetv1alpha1.DatabaseCluster, su *pgx.Conn) {
	t.Helper()
	var encrypted int
	if err := su.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid)
		WHERE r.state = 'streaming' AND r.application_name NOT LIKE '%-clone' AND s.ssl`).Scan(&encrypted); err != nil {
		t.Fatal(err)
	}
	if encrypted != 2 {
		t.Errorf("%d standbys stream over TLS, want both", encrypted)
	}

	login := fed.login(t, d.Namespace, d.Name, dbfleetv1alpha1.CredentialsApp, "")
	host, port, err := net.SplitHostPort(d.Status.Endpoints.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=%s sslmode=disable connect_timeout=10",
		host, port, login.user, login.password, login.dbname))
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := pgx.ConnectConfig(ctx, plain); err == nil {
		_ = conn.Close(ctx)
		t.Error("a plaintext login was accepted")
	} else if !strings.Contains(err.Error(), "no encryption") {
		t.Errorf("plaintext: %v, want refused by pg_hba.conf (no encryption)", err)
	}

	// The app Secret in a member that does not run the primary, as an application there reads it.
	var other string
	for _, s := range d.Status.Placements {
		if s.Cluster != d.Status.Primary.Cluster {
			other = s.Cluster
			break
		}
	}
	app := &corev1.Secret{}
	if err := fed.clusters[other].Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name + "-app"}, app); err != nil {
		t.Fatalf("the app Secret in %s: %v", other, err)
	}
	byAddress := login
	byAddress.ca, byAddress.serverName = app.Data["ca.crt"], host
	await(t, time.Minute, "verify-full of "+host+" under "+other+"'s ca.crt", func(ctx context.Context) (bool, error) {
		conn, err := byAddress.connect(ctx, d.Status.Endpoints.ReadWrite, 10*time.Second)
		if err != nil {
			t.Logf("verify-full by address: %v", err)
			return false, nil // the certificate naming the address may not have reached the pod yet
		}
		return true, conn.Close(ctx)
	})
	statusPortAnswersTheAgentAlone(ctx, t, d, host)
}

// statusPortAnswersTheAgentAlone probes the primary instance's status port from outside, as
// anyone on the network could: plain HTTP and HTTPS without the agent's client certificate get
// no status; the kubelet's probes (HTTPS, nothing shown or verified) get their answer; the
// agent's certificate from the member's <db>-tls Secret gets the status.
func statusPortAnswersTheAgentAlone(ctx context.Context, t *testing.T, d *dbfleetv1alpha1.DatabaseCluster, host string) {
	t.Helper()
	base := net.JoinHostPort(host, strconv.Itoa(contract.Port))
	get := func(c *http.Client, url string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(body), err
	}
	transport := func(cfg *tls.Config) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	}
	anonymous := map[string]struct {
		c   *http.Client
		url string
	}{
		"plain HTTP": {transport(nil), "http://" + base + contract.Path},
		"HTTPS without a client certificate": {transport(&tls.Config{InsecureSkipVerify: true}), //nolint:gosec // a probe from anyone
			"https://" + base + contract.Path},
	}
	for name, a := range anonymous {
		code, body, err := get(a.c, a.url)
		if err == nil && (code == http.StatusOK || strings.Contains(body, `"role"`)) {
			t.Errorf("/status of %s by %s: %d %q, want no status", base, name, code, body)
		}
	}
	probe := transport(&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // as the kubelet probes
	if code, body, err := get(probe, "https://"+base+contract.ReadyPath); err != nil || code != http.StatusOK {
		t.Errorf("/readyz of the primary as the kubelet probes it: %d %q %v", code, body, err)
	}
	secret := &corev1.Secret{}
	if err := fed.clusters[d.Status.Primary.Cluster].Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name + "-tls"}, secret); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret.Data[contract.SecretKeyCACert])
	pair, err := tls.X509KeyPair(secret.Data[contract.SecretKeyStatusClientCert], secret.Data[contract.SecretKeyStatusClientKey])
	if err != nil {
		t.Fatalf("the agent's client certificate in %s/%s-tls: %v", d.Namespace, d.Name, err)
	}
	agent := transport(&tls.Config{RootCAs: roots, ServerName: contract.TLSServerName(d.Name, d.Namespace), Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if code, body, err := get(agent, "https://"+base+contract.Path); err != nil || code != http.StatusOK || !strings.Contains(body, `"role":"primary"`) {
		t.Errorf("/status of the primary with the agent's certificate: %d %q %v", code, body, err)
	}
}
