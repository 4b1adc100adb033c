package instance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/pgbackrest"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// Continuous archiving. With a backup repository (Options.BackupDir), postgres runs with
// archive_mode on and archive_command "<this program> wal-archive %p", every pgBackRest option in
// its environment. postgres archives only while it runs as primary, so the repository takes WAL
// from whichever instance is the primary of the newest epoch, onto each new timeline after a
// failover (a promoted standby archives the old timeline's last, partial segment and the new
// timeline's history file too); a fenced primary is stopped and archives nothing. A push that
// fails leaves the segment in pg_wal, and postgres tries again: nothing is removed and writes
// go on while the volume has room.

// Directories on the data volume, postgres's alone: the socket pgBackRest reaches postgres by,
// and pgBackRest's lock files with the wal-archive record.
const (
	socketDirName  = ".dbfleet-socket"
	scratchDirName = ".dbfleet-pgbackrest"
	archivedRecord = "archived.json"
	// stanzaRetry is how long after a failed stanza-create the next one is tried.
	stanzaRetry = 10 * time.Second
	// stanzaBudget bounds one stanza-create: a store that does not answer is tried again later.
	stanzaBudget = 2 * time.Minute
)

// archiving is the manager's side of continuous archiving.
type archiving struct {
	tool   pgbackrest.Tool // Password is filled in at each use
	record string
	// stanza: created (ready), being created (running), last tried, and why it failed.
	ready, running bool
	tried          time.Time
	err            error
}

// newArchiving describes the repository and the pgBackRest runs; nil without a repository.
func newArchiving(opts Options, runAs *syscall.Credential) (*archiving, error) {
	if opts.BackupDir == "" {
		return nil, nil
	}
	repo, err := opts.readBackup()
	if err != nil {
		return nil, err
	}
	scratch := filepath.Join(opts.DataVolume, scratchDirName)
	return &archiving{record: filepath.Join(scratch, archivedRecord), tool: pgbackrest.Tool{
		Bin: opts.PGBackRest, Stanza: opts.Database, Repo: repo, DataDir: opts.DataDir(),
		Socket: filepath.Join(opts.DataVolume, socketDirName), Port: opts.PostgresPort, Scratch: scratch, RunAs: runAs}}, nil
}

// prepare creates the socket and scratch directories, postgres's user's alone.
func (a *archiving) prepare(owner *pgconf.Owner) error {
	for _, dir := range []string{a.tool.Socket, a.tool.Scratch} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		if owner != nil {
			if err := os.Chown(dir, owner.UID, owner.GID); err != nil {
				return fmt.Errorf("chown %s: %w", dir, err)
			}
		}
	}
	return nil
}

// postgresEnv is what postgres passes on to archive_command: the repository and where the
// record goes, but no login (archive-push needs none).
func (a *archiving) postgresEnv() ([]string, error) {
	t := a.tool
	t.Socket, t.User, t.Password = "", "", ""
	env, err := t.Env()
	if err != nil {
		return nil, err
	}
	return append(env, pgbackrest.EnvArchiveRecord+"="+a.record, pgbackrest.EnvBinary+"="+a.tool.Bin), nil
}

// settings are postgresql.conf's archiving settings.
func (a *archiving) settings(self string, timeout time.Duration) *pgconf.Archive {
	return &pgconf.Archive{Command: self + " wal-archive %p", Timeout: timeout, SocketDir: a.tool.Socket}
}

// ensureStanza creates the repository's stanza once this instance runs as primary, in the
// background: the store may be slow or away, and no write waits for it (WAL waits in pg_wal
// until the stanza exists). A repository that already holds another database's stanza is
// refused by pgBackRest and reported (status.archive.error), never written into.
func (m *Manager) ensureStanza(ctx context.Context) {
	a := m.archive
	if a == nil {
		return
	}
	m.mu.Lock()
	if a.ready || a.running || time.Since(a.tried) < stanzaRetry {
		m.mu.Unlock()
		return
	}
	a.running, a.tried = true, time.Now()
	t := a.tool
	m.mu.Unlock()
	su := m.credentials().superuser
	t.User, t.Password = su.Username, su.Password
	go func() {
		cctx, cancel := context.WithTimeout(ctx, stanzaBudget)
		defer cancel()
		err := t.StanzaCreate(cctx)
		m.mu.Lock()
		a.running, a.ready, a.err = false, err == nil, err
		m.mu.Unlock()
		if err != nil {
			m.log.Info("The backup repository cannot take this database's WAL yet; it is kept in pg_wal", "repository", t.Repo.Where(), "err", pgbackrest.Summary(err))
		} else {
			m.log.Info("Backup repository ready", "repository", t.Repo.Where(), "stanza", t.Stanza)
		}
	}()
}

// archiveStatus is status.archive of a primary, from postgres's archiver statistics, the
// wal-archive record (the store's error) and the stanza.
func (m *Manager) archiveStatus(arch pgsql.Archiver) *contract.Archive {
	a := m.archive
	if a == nil {
		return nil
	}
	st := &contract.Archive{Repository: a.tool.Repo.Where(), LastArchivedWAL: arch.LastArchivedWAL, LastFailedWAL: arch.LastFailedWAL}
	if !arch.LastArchivedTime.IsZero() {
		st.LastArchivedTime = arch.LastArchivedTime.UTC().Format(time.RFC3339)
	}
	if !arch.LastFailedTime.IsZero() {
		st.LastFailedTime = arch.LastFailedTime.UTC().Format(time.RFC3339)
	}
	if arch.LastFailedTime.After(arch.LastArchivedTime) {
		// Failing now: the record says why (written by the push that failed).
		st.Error = "archive_command failed"
		if r, ok, err := pgbackrest.ReadArchived(a.record); err == nil && ok && r.Error != "" {
			st.Error = r.Error
		}
	}
	m.mu.Lock()
	stanzaErr := a.err
	m.mu.Unlock()
	if stanzaErr != nil && st.Error == "" {
		st.Error = "the repository cannot be prepared: " + pgbackrest.Summary(stanzaErr)
	}
	return st
}
