package pgsql

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Credentials are one role's login, as mounted from its Secret.
type Credentials struct {
	Username, Password, DBName string
}

// ConnConfig is a pgx configuration for host:port as user, over TLS with tlsConfig (ClientTLS),
// or in plaintext when it is nil: the instance's own loopback connections only, the one
// plaintext login pg_hba.conf takes.
func ConnConfig(host string, port int, user, password, dbname string, tlsConfig *tls.Config) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("pgx config: %w", err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database = host, uint16(port), user, password, dbname
	cfg.TLSConfig = tlsConfig
	cfg.Fallbacks = nil
	cfg.ConnectTimeout = 5e9
	// The manager's own writes (roles, passwords, the readiness write) are acknowledged once on
	// the primary's disk: with synchronous replication required they would otherwise wait for
	// standbys that cannot clone before those roles exist. Clients' commits still wait.
	cfg.RuntimeParams = map[string]string{"synchronous_commit": "local"}
	return cfg, nil
}

// Connect opens a connection.
func Connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres at %s:%d as %s: %w", cfg.Host, cfg.Port, cfg.User, err)
	}
	return conn, nil
}

// EnsureRoles creates the replication and app roles and the app's database unless they exist,
// and sets all three roles' passwords from the Secrets (so an edited Secret takes effect).
func EnsureRoles(ctx context.Context, conn *pgx.Conn, superuser, replication, app Credentials) error {
	for _, r := range []struct {
		c     Credentials
		attrs string
	}{{replication, "LOGIN REPLICATION"}, {app, "LOGIN"}} {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", r.c.Username).Scan(&exists); err != nil {
			return fmt.Errorf("look up role %s: %w", r.c.Username, err)
		}
		verb := "CREATE"
		if exists {
			verb = "ALTER"
		}
		if err := setPassword(ctx, conn, fmt.Sprintf("%s ROLE %s WITH %s", verb, ident(r.c.Username), r.attrs), r.c.Password); err != nil {
			return err
		}
	}
	if err := grantRewind(ctx, conn, replication.Username); err != nil {
		return err
	}
	if app.DBName != "" {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", app.DBName).Scan(&exists); err != nil {
			return fmt.Errorf("look up database %s: %w", app.DBName, err)
		}
		if !exists {
			if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", ident(app.DBName), ident(app.Username))); err != nil {
				return fmt.Errorf("create database %s: %w", app.DBName, err)
			}
		}
	}
	// The superuser's password last: the connection doing all this logged in with the old one,
	// and a failure before this point can be retried with it.
	return setPassword(ctx, conn, "ALTER ROLE "+ident(superuser.Username), superuser.Password)
}

// setPassword runs stmt (a CREATE or ALTER ROLE) with PASSWORD and the password's SCRAM verifier
// (passwordForm), in a transaction that logs neither the statement nor, should it fail, its text
// (log_statement, log_min_error_statement: the server's log would otherwise quote it). Its error
// names the statement without the password.
func setPassword(ctx context.Context, conn *pgx.Conn, stmt, password string) error {
	form, err := passwordForm(password)
	if err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range []string{"SET LOCAL log_statement = 'none'", "SET LOCAL log_min_error_statement = 'panic'",
		stmt + " PASSWORD " + literal(form)} {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// rewindFunctions are what pg_rewind calls on its source server: with EXECUTE on them a role
// that is not a superuser may rewind from it (PostgreSQL's pg_rewind documentation; CloudNativePG
// grants them to its replication user too).
var rewindFunctions = []string{
	"pg_catalog.pg_ls_dir(text, boolean, boolean)",
	"pg_catalog.pg_stat_file(text, boolean)",
	"pg_catalog.pg_read_binary_file(text)",
	"pg_catalog.pg_read_binary_file(text, bigint, bigint, boolean)",
}

// grantRewind lets the replication role rewind a former primary from this server and checkpoint
// it first (pg_checkpoint, from PostgreSQL 15), so that the superuser need never log in from
// another host. GRANT is idempotent; the grants reach every standby with the WAL.
func grantRewind(ctx context.Context, conn *pgx.Conn, role string) error {
	stmt := fmt.Sprintf("GRANT EXECUTE ON FUNCTION %s TO %s", strings.Join(rewindFunctions, ", "), ident(role))
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("grant pg_rewind's functions to %s: %w", role, err)
	}
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return fmt.Errorf("read the server version: %w", err)
	}
	if version >= 150000 {
		if _, err := conn.Exec(ctx, "GRANT pg_checkpoint TO "+ident(role)); err != nil {
			return fmt.Errorf("grant pg_checkpoint to %s: %w", role, err)
		}
	}
	return nil
}

// IsInsufficientPrivilege says whether err is the server's refusal for lack of a privilege
// (SQLSTATE 42501).
func IsInsufficientPrivilege(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42501"
}

// SyncSlots creates a physical slot (reserving WAL at once) for each name in want and drops the
// inactive slots with prefix that are not wanted; it returns what it created and dropped.
func SyncSlots(ctx context.Context, conn *pgx.Conn, prefix string, want []string) (created, dropped []string, err error) {
	rows, err := conn.Query(ctx, "SELECT slot_name, active FROM pg_replication_slots WHERE slot_type = 'physical'")
	if err != nil {
		return nil, nil, fmt.Errorf("list replication slots: %w", err)
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		var active bool
		if err := rows.Scan(&name, &active); err != nil {
			return nil, nil, fmt.Errorf("read replication slots: %w", err)
		}
		have[name] = active
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list replication slots: %w", err)
	}
	wanted := map[string]bool{}
	for _, name := range want {
		wanted[name] = true
		if _, ok := have[name]; ok {
			continue
		}
		if _, err := conn.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true)", name); err != nil {
			return created, dropped, fmt.Errorf("create replication slot %s: %w", name, err)
		}
		created = append(created, name)
	}
	for name, active := range have {
		if wanted[name] || active || !strings.HasPrefix(name, prefix) {
			continue
		}
		if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", name); err != nil {
			return created, dropped, fmt.Errorf("drop replication slot %s: %w", name, err)
		}
		dropped = append(dropped, name)
	}
	return created, dropped, nil
}

// Reload makes postgres re-read its configuration (a new primary_conninfo restarts the
// walreceiver without restarting the server).
func Reload(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload configuration: %w", err)
	}
	return nil
}

// Write proves the server takes writes: it assigns a transaction id and commits, without waiting
// for synchronous standbys (whether commits wait for them is the status' Synchronous.Waiting).
func Write(ctx context.Context, conn *pgx.Conn) error {
	if _, err := conn.Exec(ctx, "BEGIN; SET LOCAL synchronous_commit TO local; SELECT pg_current_xact_id(); COMMIT"); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

// Server is what the status reports of the running server.
type Server struct {
	InRecovery  bool
	Timeline    int64
	ReceivedLSN string
	ReplayedLSN string
	LagBytes    int64
	Streaming   bool
	// Connected: a standby's walreceiver is connected to a primary (streaming or not yet).
	Connected        bool
	SystemIdentifier string
	// Archiver is pg_stat_archiver (a primary with archive_mode on).
	Archiver Archiver
	// InsertLSN is a primary's WAL insert position, read before anything else of the reading.
	InsertLSN string
	// SynchronousStandbyNames is synchronous_standby_names in effect (primary).
	SynchronousStandbyNames string
	// Replication are the primary's pg_stat_replication rows, by application name.
	Replication []Replica
}

// Archiver is what pg_stat_archiver says of archive_command: the last segment archived and the
// last one that failed, with their times (zero: none since the statistics began).
type Archiver struct {
	LastArchivedWAL, LastFailedWAL   string
	LastArchivedTime, LastFailedTime time.Time
}

// Replica is one row of pg_stat_replication. WriteLSN is what the standby's last reply said it
// has written: the failsafe hears the standby by it (pkg/instance/contact).
type Replica struct {
	ApplicationName, State, SyncState, FlushLSN, WriteLSN string
}

// ReadServer reads the server's replication state in one round trip: the statements go out as
// one pipeline and run in order, each guarded so that none fails on a server of the other role
// (a failed one would abort the rest). On a starved machine every round trip waits for the
// backend to be scheduled; six of them made a reading take 3-6 s where the failsafe's hearing of
// the standbys needs it fresh. A primary's InsertLSN is read first: the caller notes its clock
// before calling, so WAL past InsertLSN was inserted after that time (the failsafe's probe),
// and the standbys' replies read after it in the same pipeline are matched against earlier
// probes only.
func ReadServer(ctx context.Context, conn *pgx.Conn) (Server, error) {
	var (
		s                    Server
		sysid                int64
		insert, lsn, walfile string
		received, replayed   *string
		lag, tli, recvTLI    *int64
		status               string
		replicas             []Replica
	)
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_is_in_recovery(), system_identifier,
		CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_current_wal_insert_lsn()::text END FROM pg_control_system()`).
		QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&s.InRecovery, &sysid, &insert); err != nil {
				return fmt.Errorf("read recovery state: %w", err)
			}
			return nil
		})
	b.Queue(`SELECT CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_current_wal_lsn()::text END,
		CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_walfile_name(pg_current_wal_lsn()) END,
		current_setting('synchronous_standby_names')`).
		QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&lsn, &walfile, &s.SynchronousStandbyNames); err != nil {
				return fmt.Errorf("read WAL position: %w", err)
			}
			return nil
		})
	b.Queue(`SELECT coalesce(application_name, ''), coalesce(state, ''), coalesce(sync_state, ''),
		coalesce(flush_lsn::text, ''), coalesce(write_lsn::text, '') FROM pg_stat_replication ORDER BY application_name, pid`).
		Query(func(rows pgx.Rows) error {
			var err error
			replicas, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replica, error) {
				var r Replica
				err := row.Scan(&r.ApplicationName, &r.State, &r.SyncState, &r.FlushLSN, &r.WriteLSN)
				return r, err
			})
			if err != nil {
				return fmt.Errorf("read pg_stat_replication: %w", err)
			}
			return nil
		})
	b.Queue(`SELECT pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text,
		pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint,
		(SELECT timeline_id FROM pg_control_checkpoint())::bigint`).
		QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&received, &replayed, &lag, &tli); err != nil {
				return fmt.Errorf("read replay position: %w", err)
			}
			return nil
		})
	// A row exists from when the walreceiver's connection is established until it marks itself
	// gone, before it disconnects: Connected is what the failsafe's silence counts by.
	b.Queue("SELECT coalesce(status, ''), received_tli::bigint FROM pg_stat_wal_receiver").
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&status, &recvTLI)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return fmt.Errorf("read walreceiver: %w", err)
			default:
				s.Connected = true
			}
			return nil
		})
	b.Queue(`SELECT coalesce(last_archived_wal, ''), last_archived_time, coalesce(last_failed_wal, ''), last_failed_time FROM pg_stat_archiver`).
		QueryRow(func(row pgx.Row) error {
			var archived, failed *time.Time
			if err := row.Scan(&s.Archiver.LastArchivedWAL, &archived, &s.Archiver.LastFailedWAL, &failed); err != nil {
				return fmt.Errorf("read pg_stat_archiver: %w", err)
			}
			if archived != nil {
				s.Archiver.LastArchivedTime = *archived
			}
			if failed != nil {
				s.Archiver.LastFailedTime = *failed
			}
			return nil
		})
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return s, err
	}
	s.SystemIdentifier = strconv.FormatUint(uint64(sysid), 10)
	if !s.InRecovery {
		s.InsertLSN, s.ReceivedLSN, s.ReplayedLSN, s.Replication = insert, lsn, lsn, replicas
		if len(walfile) >= 8 {
			s.Timeline, _ = strconv.ParseInt(walfile[:8], 16, 64)
		}
		return s, nil
	}
	s.SynchronousStandbyNames = ""
	if received != nil {
		s.ReceivedLSN = *received
	}
	if replayed != nil {
		s.ReplayedLSN = *replayed
	}
	if lag != nil && *lag > 0 {
		s.LagBytes = *lag
	}
	if tli != nil {
		s.Timeline = *tli
	}
	if s.Connected {
		s.Streaming = status == "streaming"
		if s.Streaming && recvTLI != nil && *recvTLI > s.Timeline {
			s.Timeline = *recvTLI
		}
	}
	return s, nil
}

// IdentifySystem asks the server at host:port, over the replication protocol as the replication
// role and over TLS with tlsConfig (ClientTLS), for its database system identifier.
func IdentifySystem(ctx context.Context, host, port string, c Credentials, tlsConfig *tls.Config) (string, error) {
	if tlsConfig == nil {
		return "", errors.New("IdentifySystem: no TLS configuration")
	}
	dsn := fmt.Sprintf("host=%s port=%s user=%s password=%s dbname=replication replication=true sslmode=disable connect_timeout=5",
		dsnValue(host), dsnValue(port), dsnValue(c.Username), dsnValue(c.Password))
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("replication connection to %s: %w", net.JoinHostPort(host, port), err)
	}
	cfg.TLSConfig, cfg.Fallbacks = tlsConfig, nil
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("connect for replication to %s: %w", net.JoinHostPort(host, port), err)
	}
	defer conn.Close(context.Background())
	results, err := conn.Exec(ctx, "IDENTIFY_SYSTEM").ReadAll()
	if err != nil {
		return "", fmt.Errorf("IDENTIFY_SYSTEM on %s: %w", net.JoinHostPort(host, port), err)
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || len(results[0].Rows[0]) < 1 {
		return "", fmt.Errorf("IDENTIFY_SYSTEM on %s: unexpected answer", net.JoinHostPort(host, port))
	}
	return string(results[0].Rows[0][0]), nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// literal quotes s as an SQL string (standard_conforming_strings is on: only quotes double).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func dsnValue(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
