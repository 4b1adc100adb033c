package pgbackrest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The environment of the wal-archive command, beside Tool.Env's: where it records what it did,
// and the pgbackrest program to run (pgbackrest on PATH when unset).
const (
	EnvArchiveRecord = "DBFLEET_ARCHIVE_RECORD"
	EnvBinary        = "DBFLEET_PGBACKREST"
)

// Archived is what the last archive_command of an instance did: the segment it was given, when
// it ended, and the store's error when it failed (postgres keeps the segment and tries again).
// postgres's own pg_stat_archiver counts the same, but not why a push failed, which is what an
// operator needs to see.
type Archived struct {
	WAL   string    `json:"wal"`
	At    time.Time `json:"at"`
	Error string    `json:"error,omitempty"`
}

// ArchivePush pushes the WAL file at path (archive_command's %p, relative to the data
// directory) to the repository, and records the outcome in the file record (written whole, by
// rename, so a reader never sees half of it).
func (t Tool) ArchivePush(ctx context.Context, path, record string) error {
	_, err := t.run(ctx, "archive-push", path)
	r := Archived{WAL: filepath.Base(path), At: time.Now().UTC()}
	if err != nil {
		r.Error = Summary(err)
	}
	if werr := writeArchived(record, r); werr != nil && err == nil {
		// The segment is in the store: postgres may recycle it. Only the record is stale.
		fmt.Fprintf(os.Stderr, "dbfleet-instance wal-archive: %s archived, but its record: %v\n", r.WAL, werr)
	}
	return err
}

func writeArchived(path string, r Archived) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ReadArchived reads the record ArchivePush keeps; a missing record is no archive_command yet.
func ReadArchived(path string) (Archived, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Archived{}, false, nil
	}
	if err != nil {
		return Archived{}, false, err
	}
	var r Archived
	if err := json.Unmarshal(data, &r); err != nil {
		return Archived{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return r, true, nil
}

var (
	// s3Code is the error code of an S3 error document in pgBackRest's message.
	s3Code = regexp.MustCompile(`<Code>([A-Za-z]+)</Code>`)
)

// Summary is one line of a pgBackRest error for a condition's message: pgBackRest's own first
// line, the S3 error code when the store sent one, and the repository; pgBackRest's dump of the
// request and response (headers, the path) stays in the log.
func Summary(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	first, _, _ := strings.Cut(e.Output, "\n")
	first = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(first), "ERROR:"))
	if first == "" {
		first = e.Err.Error()
	}
	if m := s3Code.FindStringSubmatch(e.Output); m != nil && !strings.Contains(first, m[1]) {
		first = strings.TrimSuffix(first, ":") + ": " + m[1]
	}
	return first + " (" + e.Where + ")"
}

// FromEnv is the Tool that the environment describes (Tool.Env's variables, as postgres passes
// them on to archive_command): what the wal-archive command runs with.
func FromEnv(bin string, getenv func(string) string) Tool {
	endpoint := "https://" + getenv("PGBACKREST_REPO1_S3_ENDPOINT")
	if p := getenv("PGBACKREST_REPO1_STORAGE_PORT"); p != "" && p != "443" {
		endpoint += ":" + p
	}
	port, _ := strconv.Atoi(getenv("PGBACKREST_PG1_PORT"))
	return Tool{Bin: bin, Stanza: getenv("PGBACKREST_STANZA"), DataDir: getenv("PGBACKREST_PG1_PATH"),
		Socket: getenv("PGBACKREST_PG1_SOCKET_PATH"), Port: port, User: getenv("PGBACKREST_PG1_USER"), Password: getenv("PGPASSWORD"),
		Scratch: getenv("PGBACKREST_LOCK_PATH"),
		Repo: Repo{Endpoint: endpoint, Bucket: getenv("PGBACKREST_REPO1_S3_BUCKET"), Path: getenv("PGBACKREST_REPO1_PATH"),
			Region: getenv("PGBACKREST_REPO1_S3_REGION"), AccessKeyID: getenv("PGBACKREST_REPO1_S3_KEY"),
			SecretAccessKey: getenv("PGBACKREST_REPO1_S3_KEY_SECRET"), CAFile: getenv("PGBACKREST_REPO1_STORAGE_CA_FILE")}}
}
