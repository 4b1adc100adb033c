package instance

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfleet/dbfleet/internal/objectstore"
	"github.com/dbfleet/dbfleet/internal/objectstore/storetest"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/decide"
)

// backupDir writes the repository's description as the manager reads it (--backup-dir), in a
// directory postgres's user can read (pgBackRest reads the CA file there).
func backupDir(t *testing.T, store objectstore.Store, path, secret string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := os.ReadFile(store.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	for key, value := range map[string]string{
		contract.BackupKeyEndpoint: store.Endpoint, contract.BackupKeyBucket: store.Bucket, contract.BackupKeyPath: path,
		contract.BackupKeyRegion: store.Region, contract.BackupKeyAccessKeyID: store.AccessKeyID,
		contract.BackupKeySecretAccessKey: secret, contract.BackupKeyCA: string(ca),
	} {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(value), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPrimaryArchivesItsWAL: with a backup repository, the primary creates its stanza and
// archives its WAL to a real S3 store through "dbfleet-instance wal-archive", and its status
// says what was archived last; with a wrong secret the store's refusal is in the status, the
// segment stays in pg_wal, and the primary goes on taking writes.
func TestPrimaryArchivesItsWAL(t *testing.T) {
	ctx := context.Background()
	store := storetest.Start(t, "backups")

	p := archivingPrimary(ctx, t, "archive", "archive-0", backupDir(t, store, "/archive/db", store.SecretAccessKey))
	st := p.waitStatus(ctx, t, "a primary archiving its WAL", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Archive != nil && s.Archive.LastArchivedWAL != "" && s.Archive.Error == ""
	})
	if want := "s3://backups/archive/db at " + store.Endpoint; st.Archive.Repository != want {
		t.Errorf("status.archive.repository %q, want %q", st.Archive.Repository, want)
	}
	objs, err := storetest.Client(t, store).List(ctx, store.Bucket, "archive/db/archive/"+database+"/")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range objs {
		found = found || strings.Contains(o.Key, "/"+st.Archive.LastArchivedWAL)
	}
	if !found {
		t.Errorf("the store holds no %s under archive/db: %d objects", st.Archive.LastArchivedWAL, len(objs))
	}

	// Another database whose repository refuses its key.
	q := archivingPrimary(ctx, t, "archive-refused", "refused-0", backupDir(t, store, "/archive/refused", "not-the-secret"))
	st = q.waitStatus(ctx, t, "a primary whose archive is refused", func(s contract.Status) bool {
		return s.Role == contract.RolePrimary && s.Ready && s.Archive != nil && s.Archive.LastFailedWAL != "" &&
			strings.Contains(s.Archive.Error, "SignatureDoesNotMatch")
	})
	if !strings.Contains(st.Archive.Error, "s3://backups/archive/refused at "+store.Endpoint) || st.Archive.LastArchivedWAL != "" {
		t.Errorf("status.archive %+v: want the repository named and nothing archived", st.Archive)
	}
	if _, err := os.Stat(filepath.Join(q.dataDir(), "pg_wal", st.Archive.LastFailedWAL)); err != nil {
		t.Errorf("the segment whose push failed is not kept in pg_wal: %v", err)
	}
	// Writes go on.
	for range 3 {
		writeRow(ctx, t, q)
	}
}

// archivingPrimary starts a primary of its own namespace with the repository dir, commits a
// row and switches its segment out for the archiver (what archive_timeout does with time; the
// time it takes is a figure of its own, not this test's subject).
func archivingPrimary(ctx context.Context, t *testing.T, ns, pod, dir string) *proc {
	t.Helper()
	createNamespace(ctx, t, ns)
	p := newProc(ctx, t, pod, ns, "east")
	p.args = append(p.args, "--backup-dir", dir, "--archive-timeout", "2s")
	createPod(ctx, t, ns, p.pod, contract.PodRolePrimary, 1, p.endpoint(), "")
	renew(t, ns, decide.Holder("east", 1))
	p.start(t)
	p.waitStatus(ctx, t, "a primary", func(s contract.Status) bool { return s.Role == contract.RolePrimary && s.Ready })
	writeRow(ctx, t, p)
	switchWAL(ctx, t, p)
	return p
}

// switchWAL closes p's current WAL segment (pg_switch_wal, as the superuser over loopback), which
// postgres then hands to archive_command.
func switchWAL(ctx context.Context, t *testing.T, p *proc) {
	t.Helper()
	conn, err := p.connect(ctx, superuser, superuser.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_switch_wal()"); err != nil {
		t.Fatal(err)
	}
}

// writeRow commits a row on p as the app.
func writeRow(ctx context.Context, t *testing.T, p *proc) {
	t.Helper()
	conn, err := p.connect(ctx, app, app.password)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS rows (at timestamptz DEFAULT now())"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO rows DEFAULT VALUES"); err != nil {
		t.Fatalf("a write on %s: %v", p.pod, err)
	}
}
