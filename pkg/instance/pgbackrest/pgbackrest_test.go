package pgbackrest_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfleet/dbfleet/internal/objectstore/storetest"
	"github.com/dbfleet/dbfleet/pkg/instance/pgbackrest"
)

const pgBin = "/usr/lib/postgresql/15/bin"

// server is a postgres of the test's, run as the postgres user with the Tool's environment.
type server struct {
	t    *testing.T
	dir  string
	sock string
	port int
	as   *syscall.Credential
}

func (s server) conn(ctx context.Context) *pgx.Conn {
	s.t.Helper()
	c, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", s.sock, s.port))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func (s server) pgCtl(env []string, args ...string) {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(pgBin, "pg_ctl"), append([]string{"-D", s.dir, "-l", s.dir + ".log", "-w"}, args...)...)
	cmd.Env, cmd.SysProcAttr = env, &syscall.SysProcAttr{Credential: s.as}
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(s.dir + ".log")
		s.t.Fatalf("pg_ctl %v: %v: %s\n%s", args, err, out, log)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// postgresUser is who postgres runs as when the test runs as root.
func postgresUser(t *testing.T) (*syscall.Credential, int, int) {
	if os.Geteuid() != 0 {
		return nil, os.Getuid(), os.Getgid()
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root needs a postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, uid, gid
}

// TestArchiveBackupAndRestoreThroughARealStore runs the repository's whole path on a real
// PostgreSQL 15, a real pgBackRest and a real S3 store: the stanza, WAL archived by
// archive_command with every option from the environment, a full backup, then a restore to a
// time between two commits that brings back exactly the rows committed by then.
func TestArchiveBackupAndRestoreThroughARealStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PostgreSQL, pgBackRest and an S3 store")
	}
	bin, err := exec.LookPath("pgbackrest")
	if err != nil {
		t.Fatalf("pgbackrest: %v (apt-get install pgbackrest)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	store := storetest.Start(t, "backups")
	as, uid, gid := postgresUser(t)
	root := t.TempDir()
	for _, d := range []string{root, filepath.Dir(root)} { // postgres's user walks in
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(root, uid, gid); err != nil { // pg_ctl's log files go there
		t.Fatal(err)
	}
	mkdir := func(name string) string {
		p := filepath.Join(root, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sock, scratch := mkdir("sock"), mkdir("scratch")
	// A copy of the store's CA that postgres's user can read.
	ca, err := os.ReadFile(store.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(root, "store-ca.crt")
	if err := os.WriteFile(caFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	repo := pgbackrest.Repo{Endpoint: store.Endpoint, Bucket: store.Bucket, Path: "/shop/orders", Region: store.Region,
		AccessKeyID: store.AccessKeyID, SecretAccessKey: store.SecretAccessKey, CAFile: caFile}
	src := server{t: t, dir: mkdir("source"), sock: sock, port: freePort(t), as: as}
	tool := pgbackrest.Tool{Bin: bin, Stanza: "orders", Repo: repo, DataDir: src.dir, Socket: sock, Port: src.port,
		User: "postgres", Scratch: scratch, RunAs: as}
	env, err := tool.Env()
	if err != nil {
		t.Fatal(err)
	}
	initdb := exec.Command(filepath.Join(pgBin, "initdb"), "-D", src.dir, "-U", "postgres", "-A", "trust")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: as}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	conf := fmt.Sprintf("port = %d\nlisten_addresses = ''\nunix_socket_directories = '%s'\narchive_mode = on\narchive_command = '%s'\n",
		src.port, sock, pgbackrest.ArchiveCommand(bin))
	if err := appendFile(filepath.Join(src.dir, "postgresql.conf"), conf); err != nil {
		t.Fatal(err)
	}
	src.pgCtl(env, "start")
	t.Cleanup(func() { src.pgCtl(env, "stop", "-m", "immediate") })

	if err := tool.StanzaCreate(ctx); err != nil {
		t.Fatal(err)
	}
	c := src.conn(ctx)
	exec1 := func(sql string, args ...any) {
		t.Helper()
		if _, err := c.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec1("CREATE TABLE rows (n int PRIMARY KEY)")
	exec1("INSERT INTO rows VALUES (1)")
	if err := tool.Backup(ctx, true); err != nil {
		t.Fatal(err)
	}
	// pgBackRest picks the backup to restore by its stop time, recorded to the second: a target
	// must come after it, so row 2 is written once the clock has left that second.
	backups, err := tool.Info(ctx)
	if err != nil || len(backups.Backups) != 1 {
		t.Fatalf("after one backup: %+v, %v", backups, err)
	}
	if wait := time.Until(backups.Backups[0].Stop.Add(time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	exec1("INSERT INTO rows VALUES (2)")
	var between time.Time
	if err := c.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&between); err != nil {
		t.Fatal(err)
	}
	exec1("INSERT INTO rows VALUES (3)")
	var last string
	if err := c.QueryRow(ctx, "SELECT pg_walfile_name(pg_switch_wal())").Scan(&last); err != nil {
		t.Fatal(err)
	}

	// The segment holding row 3 reaches the store through archive_command.
	var info pgbackrest.Info
	for {
		if info, err = tool.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if info.ArchiveMax >= last {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("segment %s never archived: %+v", last, info)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if info.Status != "ok" || len(info.Backups) != 1 || info.Backups[0].Type != "full" || info.Backups[0].StartLSN == "" || info.ArchiveMin == "" {
		t.Fatalf("info %+v: want status ok, one full backup with its LSNs, and archived WAL", info)
	}
	objs, err := storetest.Client(t, store).List(ctx, store.Bucket, "shop/orders/archive/orders/")
	if err != nil || len(objs) == 0 {
		t.Fatalf("the store holds no archived WAL under shop/orders: %v %v", objs, err)
	}

	// Restore to the time between rows 2 and 3 into a new directory.
	dst := server{t: t, dir: mkdir("restored"), sock: sock, port: freePort(t), as: as}
	restore := tool
	restore.DataDir, restore.Port = dst.dir, dst.port
	if err := restore.Restore(ctx, pgbackrest.Target{Time: between}); err != nil {
		t.Fatal(err)
	}
	// The restored server must not archive into the source's repository.
	if err := appendFile(filepath.Join(dst.dir, "postgresql.conf"), fmt.Sprintf("port = %d\narchive_mode = off\n", dst.port)); err != nil {
		t.Fatal(err)
	}
	renv, err := restore.Env()
	if err != nil {
		t.Fatal(err)
	}
	dst.pgCtl(renv, "start")
	t.Cleanup(func() { dst.pgCtl(renv, "stop", "-m", "immediate") })
	rc := dst.conn(ctx)
	var got []int
	for {
		var inRecovery bool
		if err := rc.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
			t.Fatal(err)
		}
		if !inRecovery {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the restored server never promoted")
		case <-time.After(200 * time.Millisecond):
		}
	}
	rows, err := rc.Query(ctx, "SELECT n FROM rows ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	if got, err = pgx.CollectRows(rows, pgx.RowTo[int]); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("restored to %s: rows %v, want [1 2]", between.Format(time.RFC3339Nano), got)
	}

	// archive_command's wrapper records what it did: the segment, and the store's refusal.
	record := filepath.Join(scratch, "archived.json")
	if err := tool.ArchivePush(ctx, filepath.Join(src.dir, "pg_wal", last), record); err != nil {
		t.Fatalf("pushing %s again (already archived, same content): %v", last, err)
	}
	if r, ok, err := pgbackrest.ReadArchived(record); err != nil || !ok || r.WAL != last || r.Error != "" {
		t.Fatalf("record after a push: %+v %v %v", r, ok, err)
	}
	refused := tool
	refused.Repo.SecretAccessKey = "not-the-secret"
	if err := refused.ArchivePush(ctx, filepath.Join(src.dir, "pg_wal", last), record); err == nil {
		t.Fatal("a push with a wrong secret succeeded")
	}
	r, ok, err := pgbackrest.ReadArchived(record)
	if err != nil || !ok || r.WAL != last || !strings.Contains(r.Error, "SignatureDoesNotMatch") ||
		!strings.Contains(r.Error, "s3://backups/shop/orders at "+store.Endpoint) || strings.Contains(r.Error, "\n") {
		t.Fatalf("record after a refused push: %+v %v %v; want one line naming SignatureDoesNotMatch and the repository", r, ok, err)
	}
	t.Logf("a refused push: %s", r.Error)

	// Bad input says where it failed.
	wrong := tool
	wrong.Repo.SecretAccessKey = "not-the-secret"
	_, err = wrong.Info(ctx)
	t.Logf("a wrong secret: %v", err)
	if err != nil && (strings.Contains(err.Error(), store.SecretAccessKey) || strings.Contains(err.Error(), wrong.Repo.SecretAccessKey)) {
		t.Errorf("the error shows a secret key: %v", err)
	}
	if info, err := wrong.Info(ctx); err == nil || !strings.Contains(err.Error(), "s3://backups/shop/orders at "+store.Endpoint) {
		t.Errorf("a wrong secret: %+v, %v, want an error naming the bucket, path and endpoint", info, err)
	}
	missing := tool
	missing.Repo.Bucket = "no-such-bucket"
	_, err = missing.Info(ctx)
	t.Logf("a missing bucket: %v", err)
	if info, err := missing.Info(ctx); err == nil || !strings.Contains(err.Error(), "no-such-bucket") {
		t.Errorf("a missing bucket: %+v, %v", info, err)
	}
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(s); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
