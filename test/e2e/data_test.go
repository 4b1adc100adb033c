package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	_ = su.Close(ctx)
	if streaming != 2 {
		t.Errorf("pg_stat_replication on the primary: %d standbys streaming, want the two in west and east", streaming)
	}

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
