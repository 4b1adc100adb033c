package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// pgbench is Debian's PostgreSQL 15 pgbench (package postgresql-15, which .ci/run installs).
const pgbench = "/usr/lib/postgresql/15/bin/pgbench"

// The load: pgbench's TPC-B-like transactions at scale 10 (1,000,000 accounts, about 150 MB),
// 4 clients on 2 threads for 60 s. The machine has 2 cores, shared by the primary, its two
// standbys, three nodes' kubelets and containerds, the API servers and the hub: 4 clients keep
// the primary busy (each waits on its commit, and with synchronous replication on a standby's
// flush) without making the figure a measure of how long backends queue for a core, and 2
// threads are one a core.
const (
	pgbenchScale    = 10
	pgbenchClients  = 4
	pgbenchThreads  = 2
	pgbenchDuration = 60 * time.Second
	lagSampleEvery  = 500 * time.Millisecond
)

// TestReplicationLagUnderPgbench measures how far the standbys in the other clusters fall
// behind a primary under pgbench load, asynchronously and with synchronous replication ANY 1,
// required. A 3-replica database is placed one replica per member (primary in central); pgbench
// runs against status.endpoints.readWrite with the app credentials while the primary's
// pg_stat_replication is sampled every 500 ms (as the superuser): per standby, the bytes its
// sent, flushed and replayed positions are behind pg_current_wal_lsn(), and write_lag,
// flush_lag and replay_lag. It logs FIGURE lines (p50/p99/max of replay lag in bytes and in
// time per standby, pgbench's tps and average latency) and asserts only that, once pgbench has
// stopped, every standby replays up to the primary's position and holds the primary's pgbench
// rows. A benchmark: `make bench-replication`.
func TestReplicationLagUnderPgbench(t *testing.T) {
	requireBench(t)
	if _, err := os.Stat(pgbench); err != nil {
		t.Fatalf("pgbench: %v (install postgresql-15, as .ci/run does)", err)
	}
	for _, tc := range []struct {
		name, ns    string
		synchronous *dbfleetv1alpha1.SynchronousReplication
	}{
		{"Async", "lag-async", nil},
		{"SynchronousRequired", "lag-required", &dbfleetv1alpha1.SynchronousReplication{Number: 1, DataDurability: dbfleetv1alpha1.DataDurabilityRequired}},
	} {
		t.Run(tc.name, func(t *testing.T) { replicationLag(t, tc.ns, tc.synchronous) })
	}
}

func replicationLag(t *testing.T, ns string, synchronous *dbfleetv1alpha1.SynchronousReplication) {
	const primary = "central"
	fed.requireHealthy(t)
	fed.setUp(t, ns, evenly())
	dbc := withSuperuserFromNetwork(newDatabase(ns, "bench", 3, primary)) // it samples pg_stat_replication
	if synchronous != nil {
		dbc.Spec.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: synchronous}
	}
	fed.create(t, dbc)
	fed.awaitRollout(t, newStopwatch(t), dbc)
	fed.primaryOn(t, dbc, primary)
	ctx := context.Background()
	if synchronous != nil {
		await(t, time.Minute, "the primary's synchronous standbys on the status", func(ctx context.Context) (bool, error) {
			d, err := fed.database(ctx, dbc)
			return err == nil && d.Status.Synchronous != nil && len(d.Status.Synchronous.Synchronous) > 0, err
		})
	}
	d, err := fed.database(ctx, dbc)
	if err != nil {
		t.Fatal(err)
	}
	rw := d.Status.Endpoints.ReadWrite
	standbys := standbyMembers(t, dbc, primary)
	t.Logf("primary %s at %s; standbys %v", primaryInstance(*d.Status.Primary), rw, standbys)

	app := fed.appCredentials(t, dbc)
	start := time.Now()
	init := runPgbench(t, rw, app, "-i", "-s", fmt.Sprint(pgbenchScale), "-q")
	t.Logf("pgbench -i -s %d took %.1fs:\n%s", pgbenchScale, time.Since(start).Seconds(), init)

	su := superuser(t, dbc)
	sampler := sampleReplication(t, su, rw, standbys)
	loadBefore, cpu := loadLine(), readCPU()
	out := runPgbench(t, rw, app, "-c", fmt.Sprint(pgbenchClients), "-j", fmt.Sprint(pgbenchThreads),
		"-T", fmt.Sprint(int(pgbenchDuration.Seconds())), "-P", "10")
	busy := cpu.busySince()
	samples := sampler.stop()
	t.Logf("pgbench:\n%s", out)

	// Every standby replays up to where the primary was when pgbench stopped.
	conn, err := su.connect(ctx, rw, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var end string
	if err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&end); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	await(t, 2*time.Minute, "every standby replayed up to "+end, func(ctx context.Context) (bool, error) {
		rows, err := conn.Query(ctx, `SELECT application_name FROM pg_stat_replication
			WHERE replay_lsn IS NOT NULL AND pg_wal_lsn_diff(replay_lsn, $1::pg_lsn) >= 0`, end)
		if err != nil {
			return false, err
		}
		caught := map[string]bool{}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return false, err
			}
			caught[name] = true
		}
		if err := rows.Err(); err != nil {
			return false, err
		}
		for pod := range standbys {
			if !caught[pod] {
				return false, fmt.Errorf("%s/%s has not replayed up to %s", standbys[pod], pod, end)
			}
		}
		return true, nil
	})
	converged := time.Since(stopped)
	// ... and holds the primary's rows.
	digest := pgbenchDigest(t, app, rw)
	for _, ro := range d.Status.Endpoints.ReadOnly {
		if got := pgbenchDigest(t, app, ro); got != digest {
			t.Errorf("standby %s: pgbench tables %s, the primary %s", ro, got, digest)
		}
	}

	mode := "asynchronous"
	if synchronous != nil {
		mode = fmt.Sprintf("synchronous ANY %d, %s", synchronous.Number, synchronous.DataDurability)
	}
	tps, latency := pgbenchResult(out, `tps = ([0-9.]+) \(without initial connection time\)`), pgbenchResult(out, `latency average = ([0-9.]+) ms`)
	t.Logf("FIGURE %s: %s; pgbench -s %d -c %d -j %d -T %d against readWrite: tps %s, latency average %s ms; %d samples every %s; load %s before, CPU %.0f%% busy during the run; every standby replayed the primary's last LSN %.1fs after pgbench stopped",
		t.Name(), mode, pgbenchScale, pgbenchClients, pgbenchThreads, int(pgbenchDuration.Seconds()), tps, latency,
		samples.count, lagSampleEvery, loadBefore, busy, converged.Seconds())
	for _, pod := range samples.pods() {
		s := samples.by[pod]
		replay, replayLag := sortedCopy(s.replayBytes), sortedCopy(s.replayLag)
		flush, flushLag := sortedCopy(s.flushBytes), sortedCopy(s.flushLag)
		sent := sortedCopy(s.sentBytes)
		t.Logf("FIGURE %s standby %s/%s (%s, %d samples): replay lag p50 %s p99 %s max %s, time p50 %s p99 %s max %s; flush lag p50 %s max %s, time p50 %s max %s; sent lag p50 %s max %s",
			t.Name(), standbys[pod], pod, strings.Join(s.syncStates, "/"), len(replay),
			kib(percentile(replay, 50)), kib(percentile(replay, 99)), kib(percentile(replay, 100)),
			ms(percentile(replayLag, 50)), ms(percentile(replayLag, 99)), ms(percentile(replayLag, 100)),
			kib(percentile(flush, 50)), kib(percentile(flush, 100)), ms(percentile(flushLag, 50)), ms(percentile(flushLag, 100)),
			kib(percentile(sent, 50)), kib(percentile(sent, 100)))
	}
	for pod := range standbys {
		if _, ok := samples.by[pod]; !ok {
			t.Errorf("no sample of pg_stat_replication showed %s/%s", standbys[pod], pod)
		}
	}
}

// standbyMembers maps the pods of dbc's standbys (their application_name) to their members:
// every pod of the members other than primary.
func standbyMembers(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster, primary string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range membersExcept(primary) {
		s, err := fed.share(context.Background(), m, dbc.Namespace, dbc.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range s.pods {
			out[p.Name] = m
		}
	}
	if len(out) == 0 {
		t.Fatalf("no standby of %s outside %s", dbc.Name, primary)
	}
	return out
}

// superuser is the login of dbc's <db>-superuser Secret, to the postgres database.
func superuser(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster) credentials {
	t.Helper()
	return fed.login(t, dbc.Namespace, dbc.Name, dbfleetv1alpha1.CredentialsSuperuser, "postgres")
}

// runPgbench runs pgbench against endpoint (host:port) as login, failing the test if it fails,
// and returns what it printed.
func runPgbench(t *testing.T, endpoint string, login credentials, args ...string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, login.ca, 0o600); err != nil {
		t.Fatal(err)
	}
	// Over TLS, verify-full, as every client from another cluster: the address dialled, the
	// database's name verified.
	cmd := exec.Command(pgbench, append(append([]string{"-h", login.serverName, "-p", port, "-U", login.user}, args...), login.dbname)...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+login.password, "PGCONNECT_TIMEOUT=10", "PGHOSTADDR="+host,
		"PGSSLMODE=verify-full", "PGSSLROOTCERT="+ca)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("pgbench %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// pgbenchResult is the first group of pattern in pgbench's output ("?" when it is not there).
func pgbenchResult(out, pattern string) string {
	if m := regexp.MustCompile(pattern).FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return "?"
}

// pgbenchDigest sums up pgbench's tables at endpoint: history rows and the accounts' balance.
func pgbenchDigest(t *testing.T, login credentials, endpoint string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := login.connect(ctx, endpoint, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var history, balance int64
	if err := conn.QueryRow(ctx, "SELECT (SELECT count(*) FROM pgbench_history), (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts)").Scan(&history, &balance); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("history %d rows, balance %d", history, balance)
}

// replicationSamples are what sampleReplication saw, per standby (application_name).
type replicationSamples struct {
	count int // samples taken
	by    map[string]*standbySamples
}

type standbySamples struct {
	sentBytes, flushBytes, replayBytes []int64
	writeLag, flushLag, replayLag      []time.Duration
	syncStates                         []string // each sync_state seen, in order
}

// pods are the standbys sampled, sorted.
func (r replicationSamples) pods() []string {
	return slices.Sorted(maps.Keys(r.by))
}

type replicationSampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	got    replicationSamples
}

// sampleReplication reads the primary's pg_stat_replication every lagSampleEvery until stopped:
// for each of the standbys, how many bytes its sent, flushed and replayed positions are behind
// pg_current_wal_lsn() (read once per sample), and its write, flush and replay lag. A lag time
// PostgreSQL shows as NULL (the standby has caught up and no WAL was sent since) counts as 0.
func sampleReplication(t *testing.T, su credentials, endpoint string, standbys map[string]string) *replicationSampler {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := su.connect(ctx, endpoint, 10*time.Second)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &replicationSampler{cancel: cancel, done: make(chan struct{}), got: replicationSamples{by: map[string]*standbySamples{}}}
	const query = `WITH now AS (SELECT pg_current_wal_lsn() AS lsn)
		SELECT application_name, coalesce(sync_state, ''),
			coalesce(pg_wal_lsn_diff(now.lsn, sent_lsn), 0)::bigint, coalesce(pg_wal_lsn_diff(now.lsn, flush_lsn), 0)::bigint,
			coalesce(pg_wal_lsn_diff(now.lsn, replay_lsn), 0)::bigint,
			coalesce(extract(epoch FROM write_lag), 0)::float8, coalesce(extract(epoch FROM flush_lag), 0)::float8,
			coalesce(extract(epoch FROM replay_lag), 0)::float8
		FROM pg_stat_replication, now WHERE state = 'streaming'`
	go func() {
		defer close(s.done)
		defer func() { _ = conn.Close(context.Background()) }()
		tick := time.NewTicker(lagSampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rows, err := conn.Query(ctx, query)
			if err != nil {
				continue
			}
			s.mu.Lock()
			s.got.count++
			for rows.Next() {
				var (
					pod, state          string
					sent, flush, replay int64
					write, fl, rep      float64
				)
				if rows.Scan(&pod, &state, &sent, &flush, &replay, &write, &fl, &rep) != nil {
					continue
				}
				if _, ours := standbys[pod]; !ours {
					continue // a clone's pg_basebackup, or a standby of the primary's own cluster
				}
				b := s.got.by[pod]
				if b == nil {
					b = &standbySamples{}
					s.got.by[pod] = b
				}
				b.sentBytes, b.flushBytes, b.replayBytes = append(b.sentBytes, sent), append(b.flushBytes, flush), append(b.replayBytes, replay)
				b.writeLag, b.flushLag, b.replayLag = append(b.writeLag, seconds(write)), append(b.flushLag, seconds(fl)), append(b.replayLag, seconds(rep))
				if n := len(b.syncStates); n == 0 || b.syncStates[n-1] != state {
					b.syncStates = append(b.syncStates, state)
				}
			}
			rows.Close()
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *replicationSampler) stop() replicationSamples {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// kib formats bytes as KiB with one decimal.
func kib(b int64) string { return fmt.Sprintf("%.1f KiB", float64(b)/1024) }

// ms formats a duration in milliseconds with one decimal.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
