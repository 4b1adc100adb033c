package pgconf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WALReceiverTimeout is the standbys' wal_receiver_timeout: how soon a standby whose primary
// vanished without a reset (its node lost, its network cut) notices, and its silence, which a
// failover waits for, starts.
const WALReceiverTimeout = 5 * time.Second

// File names inside the data directory.
const (
	// ConfFile holds the server settings; postgresql.conf includes it.
	ConfFile = "dbfleet.conf"
	// StandbyConfFile holds primary_conninfo and primary_slot_name; ConfFile includes it, so a
	// new primary endpoint takes effect on a reload.
	StandbyConfFile = "dbfleet-standby.conf"
	// SynchronousConfFile holds synchronous_standby_names; ConfFile includes it, so the manager
	// changes it with a reload.
	SynchronousConfFile = "dbfleet-synchronous.conf"
	// StandbySignal makes postgres start in standby mode.
	StandbySignal = "standby.signal"
	// VersionFile exists in every initialised data directory.
	VersionFile = "PG_VERSION"
)

// Owner is who owns the files the manager writes (the user postgres runs as); nil keeps the
// manager's own user.
type Owner struct{ UID, GID int }

// Settings are the server settings the instance manager decides.
type Settings struct {
	// Port is the postgres port; ListenAddresses its listen_addresses.
	Port            int
	ListenAddresses string
	// ClusterName names the instance in the process title and logs (its pod name).
	ClusterName string
	// TLS are the server's certificate, key and CA files (TLSPaths).
	TLS TLSFiles
	// Archive, when set, turns on continuous archiving (postgres archives only while primary).
	Archive *Archive
}

func socketDirs(a *Archive) string {
	if a == nil {
		return "''"
	}
	return Quote(a.SocketDir)
}

// Archive is how a primary archives its WAL.
type Archive struct {
	// Command is archive_command.
	Command string
	// Timeout is archive_timeout: a segment is switched, so archived, at least this often while
	// there are writes (the most a total loss could lose, beside the segment in flight).
	Timeout time.Duration
	// SocketDir is a directory of postgres's own for its Unix socket: pgBackRest reaches the
	// server only by its socket (to take a backup, to create the stanza).
	SocketDir string
}

// Auth says who may connect.
type Auth struct {
	// Superuser and Replication are the role names from the Secrets.
	Superuser, Replication string
	// SuperuserFromNetwork lets the superuser log in over the network (with its password).
	SuperuserFromNetwork bool
	// SuperuserBySocket lets the superuser log in by the Unix socket (with its password), for
	// pgBackRest; the socket's directory and the socket are postgres's user's alone.
	SuperuserBySocket bool
}

// HasData says whether dir holds an initialised database.
func HasData(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, VersionFile))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("look for a database in %s: %w", dir, err)
}

// Write writes dbfleet.conf and pg_hba.conf and makes postgresql.conf include dbfleet.conf.
func Write(dir string, s Settings, a Auth, owner *Owner) error {
	if err := ensureInclude(dir, owner); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Written by dbfleet-instance at every start; edits are lost.\n")
	for _, kv := range [][2]string{
		{"listen_addresses", Quote(s.ListenAddresses)},
		{"port", fmt.Sprint(s.Port)},
		// The manager connects over TCP; a socket only for pgBackRest (Archive.SocketDir).
		{"unix_socket_directories", socketDirs(s.Archive)},
		{"cluster_name", Quote(s.ClusterName)},
		{"password_encryption", "'scram-sha-256'"},
		{"wal_level", "replica"},
		{"hot_standby", "on"},
		{"max_wal_senders", "10"},
		{"max_replication_slots", "10"},
		// Covers a standby between its clone and the primary creating its slot.
		{"wal_keep_size", "'128MB'"},
		{"wal_log_hints", "on"},
		{"recovery_target_timeline", "'latest'"},
		// A standby whose primary went away tries again every 250 ms, not every 5 s (the
		// default): after a failover it finds the new primary, re-pointed to it, seconds sooner,
		// and with synchronous replication the new primary's first commits wait on it. A
		// promotion waits it out too: postgres, asked to promote while its walreceiver has lost
		// its primary, first waits one interval for more WAL (a switchover on real nodes spent
		// 1.0 s of its 2.0 s write gap between "received promote request" and "redo done" at
		// 1 s). The cost is a failed connection attempt, and a log line, every 250 ms while the
		// primary is unreachable.
		{"wal_retrieve_retry_interval", "'250ms'"},
		// A standby whose primary vanished (its node lost, its network cut: no reset arrives)
		// notices within WALReceiverTimeout, not 60 s: its silence, which a failover waits
		// for, starts only once its walreceiver is gone. A live primary writes every 500 ms (the manager's
		// write check) and the standby pings it after 2.5 s without data, so only a primary
		// stalled that long costs a reconnection.
		{"wal_receiver_timeout", fmt.Sprintf("'%ds'", int(WALReceiverTimeout.Seconds()))},
		// TLS on every connection from the network (pg_hba.conf refuses the others); the CA
		// checks the client certificates of the replication role.
		{"ssl", "on"},
		{"ssl_cert_file", Quote(s.TLS.ServerCert)},
		{"ssl_key_file", Quote(s.TLS.ServerKey)},
		{"ssl_ca_file", Quote(s.TLS.CACert)},
		{"ssl_min_protocol_version", "'TLSv1.2'"},
		{"logging_collector", "off"},
		{"log_destination", "'stderr'"},
	} {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	if a := s.Archive; a != nil {
		for _, kv := range [][2]string{
			{"archive_mode", "on"},
			{"archive_command", Quote(a.Command)},
			{"archive_timeout", fmt.Sprintf("'%ds'", int(a.Timeout.Seconds()))},
			{"unix_socket_permissions", "0700"},
		} {
			fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
		}
	}
	fmt.Fprintf(&b, "include_if_exists = %s\n", Quote(StandbyConfFile))
	fmt.Fprintf(&b, "include_if_exists = %s\n", Quote(SynchronousConfFile))
	if err := writeFile(filepath.Join(dir, ConfFile), []byte(b.String()), owner); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "pg_hba.conf"), []byte(HBA(a)), owner)
}

// HBA is pg_hba.conf: from the network only over TLS (a plaintext connection is refused
// whoever asks), SCRAM for every role, replication connections only for the replication role,
// which must also show its client certificate, and the superuser refused over the network
// unless allowed. The one plaintext login is the superuser's over loopback: the manager's own
// connections, which never leave the pod.
func HBA(a Auth) string {
	var b strings.Builder
	b.WriteString("# Written by dbfleet-instance at every start; edits are lost.\n")
	b.WriteString("# TYPE  DATABASE  USER  ADDRESS  METHOD\n")
	su, repl := hbaName(a.Superuser), hbaName(a.Replication)
	if a.SuperuserBySocket {
		fmt.Fprintf(&b, "local all %s scram-sha-256\n", su)
	}
	fmt.Fprintf(&b, "host all %s 127.0.0.1/32 scram-sha-256\n", su)
	fmt.Fprintf(&b, "host all %s ::1/128 scram-sha-256\n", su)
	if !a.SuperuserFromNetwork {
		fmt.Fprintf(&b, "host all %s all reject\n", su)
	}
	b.WriteString("hostnossl all all all reject\n")
	fmt.Fprintf(&b, "hostssl replication %s all scram-sha-256 clientcert=verify-full\n", repl)
	// pg_rewind and a rejoining instance's checkpoint log in to a database as this role.
	fmt.Fprintf(&b, "hostssl all %s all scram-sha-256 clientcert=verify-full\n", repl)
	b.WriteString("hostssl all all all scram-sha-256\n")
	return b.String()
}

// Standby is what a standby follows.
type Standby struct {
	// Upstream is the primary endpoint, reached over TLS.
	Upstream
	// User and Password of the replication role. The password goes into a password file beside
	// the data directory, which primary_conninfo names (passfile): never into the configuration,
	// whose changes the server logs with their values.
	User, Password string
	// Passfile is that file, set by WriteStandby.
	Passfile string
	// ApplicationName is the pod name: the primary's pg_stat_replication shows it.
	ApplicationName string
	// SlotName is the physical slot the primary keeps for this standby.
	SlotName string
}

// Conninfo is primary_conninfo for s.
func (s Standby) Conninfo() string {
	parts := append(s.Params(), "user="+connValue(s.User),
		"passfile="+connValue(s.Passfile), "application_name="+connValue(s.ApplicationName),
		"dbname=replication", "connect_timeout=5")
	return strings.Join(parts, " ")
}

// WriteStandby writes dbfleet-standby.conf (a zero s follows nobody); it reports whether the file changed, so the caller
// knows to reload.
func WriteStandby(dir string, s Standby, owner *Owner) (bool, error) {
	content := "# Written by dbfleet-instance; edits are lost. Following no primary.\n"
	line := ""
	if s.Host != "" {
		line = PassfileLine(s.HostName(), s.Port, s.User, s.Password)
	}
	passfile, err := writePassfile(filepath.Dir(dir), line, owner)
	if err != nil {
		return false, fmt.Errorf("replication password file: %w", err)
	}
	s.Passfile = passfile
	if s.Host != "" {
		content = fmt.Sprintf("# Written by dbfleet-instance; edits are lost.\nprimary_conninfo = %s\nprimary_slot_name = %s\n",
			Quote(s.Conninfo()), Quote(s.SlotName))
	}
	return writeIfChanged(filepath.Join(dir, StandbyConfFile), []byte(content), owner)
}

// WriteSynchronous writes dbfleet-synchronous.conf with synchronous_standby_names = names (empty:
// asynchronous); it reports whether the file changed, so the caller knows to reload.
func WriteSynchronous(dir, names string, owner *Owner) (bool, error) {
	content := fmt.Sprintf("# Written by dbfleet-instance; edits are lost.\nsynchronous_standby_names = %s\n", Quote(names))
	return writeIfChanged(filepath.Join(dir, SynchronousConfFile), []byte(content), owner)
}

// StandbyNames is the synchronous_standby_names value that waits for any number of standbys
// (quorum commit: ANY n, not FIRST n, so no standby is preferred over another).
func StandbyNames(number int, standbys []string) string {
	if number <= 0 || len(standbys) == 0 {
		return ""
	}
	quoted := make([]string, len(standbys))
	for i, s := range standbys {
		quoted[i] = `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return fmt.Sprintf("ANY %d (%s)", number, strings.Join(quoted, ", "))
}

// SetStandbySignal creates or removes standby.signal.
func SetStandbySignal(dir string, standby bool, owner *Owner) error {
	path := filepath.Join(dir, StandbySignal)
	if !standby {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", path, err)
		}
		return nil
	}
	return writeFile(path, nil, owner)
}

// SlotName is the physical replication slot for a standby (by its application name): slot
// names allow only lower-case letters, digits and underscores, at most 63 of them.
func SlotName(applicationName string) string {
	var b strings.Builder
	b.WriteString(SlotPrefix)
	for _, r := range strings.ToLower(applicationName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '_' {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	s := b.String()
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}

// SlotPrefix starts every slot the manager creates; it drops only slots with this prefix.
const SlotPrefix = "dbfleet_"

// Quote is a postgresql.conf string value.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func connValue(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func hbaName(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func ensureInclude(dir string, owner *Owner) error {
	path := filepath.Join(dir, "postgresql.conf")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read postgresql.conf: %w", err)
	}
	line := "include_if_exists = " + Quote(ConfFile)
	if bytes.Contains(data, []byte(line)) {
		return nil
	}
	data = append(data, []byte("\n# dbfleet-instance's settings\n"+line+"\n")...)
	return writeFile(path, data, owner)
}

func writeIfChanged(path string, data []byte, owner *Owner) (bool, error) {
	old, err := os.ReadFile(path)
	if err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	return true, writeFile(path, data, owner)
}

// writeFile replaces path atomically (write beside it, then rename), mode 0600, owned by owner.
func writeFile(path string, data []byte, owner *Owner) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if owner != nil {
		if err := os.Chown(tmp, owner.UID, owner.GID); err != nil {
			return fmt.Errorf("chown %s: %w", tmp, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
