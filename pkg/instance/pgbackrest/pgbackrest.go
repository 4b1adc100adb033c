package pgbackrest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Repo is a repository in an S3 store, reached over HTTPS, path-style.
type Repo struct {
	// Endpoint is https://host[:port].
	Endpoint string
	Bucket   string
	// Path is where in the bucket the repository lives ("/<namespace>/<name>" for a database).
	Path   string
	Region string
	// AccessKeyID and SecretAccessKey sign the requests.
	AccessKeyID, SecretAccessKey string
	// CAFile is the PEM file of the CA the store's certificate is checked against; "" uses the
	// system's.
	CAFile string
}

// Validate says what is wrong with r, naming the field.
func (r Repo) Validate() error {
	u, err := url.Parse(r.Endpoint)
	switch {
	case err != nil:
		return fmt.Errorf("endpoint %q: %w", r.Endpoint, err)
	case u.Scheme != "https" || u.Hostname() == "":
		return fmt.Errorf("endpoint %q: want https://host[:port] (pgBackRest 2.45 reaches S3 stores over HTTPS only)", r.Endpoint)
	case u.Path != "" && u.Path != "/":
		return fmt.Errorf("endpoint %q: no path (the bucket and path are fields of their own)", r.Endpoint)
	case r.Bucket == "":
		return errors.New("no bucket")
	case !strings.HasPrefix(r.Path, "/"):
		return fmt.Errorf("path %q: want an absolute path in the bucket, like /namespace/name", r.Path)
	case r.Region == "":
		return errors.New("no region")
	case r.AccessKeyID == "" || r.SecretAccessKey == "":
		return errors.New("no access key")
	}
	return nil
}

// Where names the repository for messages: bucket, path and endpoint, never the keys.
func (r Repo) Where() string {
	return fmt.Sprintf("s3://%s%s at %s", r.Bucket, r.Path, r.Endpoint)
}

// env is the repository as pgBackRest's options.
func (r Repo) env() ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(r.Endpoint)
	port := u.Port()
	if port == "" {
		port = "443"
	}
	env := []string{
		"PGBACKREST_REPO1_TYPE=s3",
		"PGBACKREST_REPO1_S3_ENDPOINT=" + u.Hostname(),
		"PGBACKREST_REPO1_STORAGE_PORT=" + port,
		"PGBACKREST_REPO1_S3_URI_STYLE=path",
		"PGBACKREST_REPO1_S3_BUCKET=" + r.Bucket,
		"PGBACKREST_REPO1_S3_REGION=" + r.Region,
		"PGBACKREST_REPO1_PATH=" + r.Path,
		"PGBACKREST_REPO1_S3_KEY=" + r.AccessKeyID,
		"PGBACKREST_REPO1_S3_KEY_SECRET=" + r.SecretAccessKey,
	}
	if r.CAFile != "" {
		env = append(env, "PGBACKREST_REPO1_STORAGE_CA_FILE="+r.CAFile)
	}
	return env, nil
}

// Tool runs pgBackRest for one database's stanza against one data directory.
type Tool struct {
	// Bin is the pgbackrest program.
	Bin    string
	Stanza string
	Repo   Repo
	// DataDir is postgres's data directory (pg1-path).
	DataDir string
	// Socket is the directory of postgres's Unix socket, Port its port, User and Password the
	// superuser's login: pgBackRest reaches postgres only by its socket (backup, check,
	// stanza-create; archive-push and restore need no server).
	Socket   string
	Port     int
	User     string
	Password string
	// Scratch is a directory of the instance's own for pgBackRest's lock files.
	Scratch string
	// RunAs is who pgBackRest runs as (postgres's user); nil: this program's.
	RunAs *syscall.Credential
}

// Env is the environment pgBackRest needs, for this package's commands and for postgres, whose
// archive_command and restore_command inherit it.
func (t Tool) Env() ([]string, error) {
	env, err := t.Repo.env()
	if err != nil {
		return nil, err
	}
	env = append(env,
		"PGBACKREST_STANZA="+t.Stanza,
		"PGBACKREST_PG1_PATH="+t.DataDir,
		"PGBACKREST_LOCK_PATH="+t.Scratch,
		// Logs go to stderr, which the manager passes on; no log files in the image.
		"PGBACKREST_LOG_LEVEL_FILE=off",
		"PGBACKREST_LOG_LEVEL_CONSOLE=off",
		"PGBACKREST_LOG_LEVEL_STDERR=warn",
	)
	if t.Socket != "" {
		env = append(env, "PGBACKREST_PG1_SOCKET_PATH="+t.Socket, "PGBACKREST_PG1_PORT="+strconv.Itoa(t.Port),
			"PGBACKREST_PG1_USER="+t.User, "PGPASSWORD="+t.Password)
	}
	return env, nil
}

// ArchiveCommand is postgres's archive_command when postgres runs with Env: the options come
// from the environment, so nothing secret is in postgresql.conf.
func ArchiveCommand(bin string) string { return bin + " archive-push %p" }

// run runs pgbackrest with args, killing it when ctx ends; its stdout, or an error with the end
// of what it printed.
func (t Tool) run(ctx context.Context, args ...string) ([]byte, error) {
	env, err := t.Env()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, t.Bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: t.RunAs}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		out := strings.TrimSpace(stderr.String())
		if out == "" {
			out = strings.TrimSpace(stdout.String())
		}
		return nil, &Error{Args: args, Where: t.Repo.Where(), Err: err, Output: out}
	}
	return stdout.Bytes(), nil
}

// Error is a pgbackrest command that failed, with all it printed (pgBackRest prints the request
// and the store's whole answer after its one-line message).
type Error struct {
	Args   []string
	Where  string // the repository
	Err    error  // the exit status
	Output string
}

// maxErrorOutput bounds what Error() shows of the output: its beginning (pgBackRest's message)
// and its end (the store's answer).
const maxErrorOutput = 2000

func (e *Error) Error() string {
	out := e.Output
	if len(out) > maxErrorOutput {
		out = out[:maxErrorOutput/2] + " … " + out[len(out)-maxErrorOutput/2:]
	}
	return fmt.Sprintf("pgbackrest %s (%s): %v: %s", strings.Join(e.Args, " "), e.Where, e.Err, out)
}

func (e *Error) Unwrap() error { return e.Err }

// StanzaCreate creates the stanza in the repository, or checks the existing one belongs to this
// database (same system identifier and version).
func (t Tool) StanzaCreate(ctx context.Context) error {
	_, err := t.run(ctx, "stanza-create")
	return err
}

// Backup takes a full backup (or an incremental one on the last), starting with an immediate
// checkpoint.
func (t Tool) Backup(ctx context.Context, full bool) error {
	typ := "incr"
	if full {
		typ = "full"
	}
	_, err := t.run(ctx, "backup", "--type="+typ, "--start-fast")
	return err
}

// Target is where a restore stops: a time, an LSN, or neither (everything archived).
type Target struct {
	Time time.Time
	LSN  string
}

// Restore writes the repository's newest backup that reaches the target into DataDir (which
// must be empty) and the recovery settings that replay the archive up to the target, then
// promote.
func (t Tool) Restore(ctx context.Context, target Target) error {
	args := []string{"restore"}
	switch {
	case !target.Time.IsZero() && target.LSN != "":
		return errors.New("a restore target is a time or an LSN, not both")
	case !target.Time.IsZero():
		args = append(args, "--type=time", "--target="+target.Time.UTC().Format("2006-01-02 15:04:05.999999-07"), "--target-action=promote")
	case target.LSN != "":
		args = append(args, "--type=lsn", "--target="+target.LSN, "--target-action=promote")
	}
	_, err := t.run(ctx, args...)
	return err
}

// Info is what the repository holds of the stanza.
type Info struct {
	Status  string   // pgBackRest's status message: "ok", "no valid backups", "missing stanza path", ...
	Backups []Backup // oldest first
	// ArchiveMin and ArchiveMax are the oldest and newest WAL segment archived ("" when none).
	ArchiveMin, ArchiveMax string
}

// Backup is one backup in the repository.
type Backup struct {
	Label             string
	Type              string // full, diff, incr
	Start, Stop       time.Time
	StartLSN, StopLSN string
	StartWAL, StopWAL string
}

// Info reads what the repository holds.
func (t Tool) Info(ctx context.Context) (Info, error) {
	out, err := t.run(ctx, "info", "--output=json")
	if err != nil {
		return Info{}, err
	}
	info, err := parseInfo(out, t.Stanza)
	if err != nil {
		return Info{}, fmt.Errorf("%w (%s)", err, t.Repo.Where())
	}
	return info, nil
}

// infoOther is pgBackRest's status code for a stanza it could not read at all ("other"); the
// others (1 missing stanza path, 2 no valid backups, 3 missing stanza data, ...) say what the
// repository holds.
const infoOther = 99

func parseInfo(out []byte, stanza string) (Info, error) {
	var stanzas []struct {
		Name   string `json:"name"`
		Status struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"status"`
		Repo []struct {
			Status struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"status"`
		} `json:"repo"`
		Archive []struct {
			Min string `json:"min"`
			Max string `json:"max"`
		} `json:"archive"`
		Backup []struct {
			Label   string `json:"label"`
			Type    string `json:"type"`
			Archive struct {
				Start string `json:"start"`
				Stop  string `json:"stop"`
			} `json:"archive"`
			LSN struct {
				Start string `json:"start"`
				Stop  string `json:"stop"`
			} `json:"lsn"`
			Timestamp struct {
				Start int64 `json:"start"`
				Stop  int64 `json:"stop"`
			} `json:"timestamp"`
		} `json:"backup"`
	}
	if err := json.Unmarshal(out, &stanzas); err != nil {
		return Info{}, fmt.Errorf("pgbackrest info: %w", err)
	}
	for _, s := range stanzas {
		if s.Name != stanza {
			continue
		}
		if s.Status.Code == infoOther {
			// The repository could not be read (the store refused, or is unreachable): the
			// detail is in the repository's own status.
			var why []string
			for _, r := range s.Repo {
				if r.Status.Code != 0 {
					why = append(why, strings.TrimSpace(r.Status.Message))
				}
			}
			return Info{}, fmt.Errorf("pgbackrest info: %s", strings.Join(why, "; "))
		}
		info := Info{Status: s.Status.Message}
		for _, a := range s.Archive {
			if a.Min != "" && (info.ArchiveMin == "" || a.Min < info.ArchiveMin) {
				info.ArchiveMin = a.Min
			}
			if a.Max > info.ArchiveMax {
				info.ArchiveMax = a.Max
			}
		}
		for _, b := range s.Backup {
			info.Backups = append(info.Backups, Backup{Label: b.Label, Type: b.Type,
				Start: time.Unix(b.Timestamp.Start, 0).UTC(), Stop: time.Unix(b.Timestamp.Stop, 0).UTC(),
				StartLSN: b.LSN.Start, StopLSN: b.LSN.Stop, StartWAL: b.Archive.Start, StopWAL: b.Archive.Stop})
		}
		return info, nil
	}
	return Info{}, fmt.Errorf("pgbackrest info: no stanza %s in %s", stanza, strings.TrimSpace(string(out)))
}
