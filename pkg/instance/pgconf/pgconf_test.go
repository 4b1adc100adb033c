package pgconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSlotName(t *testing.T) {
	tests := map[string]string{
		"west-1":                "dbfleet_west_1",
		"DB.Pod-0":              "dbfleet_db_pod_0",
		strings.Repeat("a", 80): "dbfleet_" + strings.Repeat("a", 55),
		"already_fine_9":        "dbfleet_already_fine_9",
	}
	for in, want := range tests {
		if got := SlotName(in); got != want {
			t.Errorf("SlotName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHBA(t *testing.T) {
	open := HBA(Auth{Superuser: "postgres", Replication: "streaming_replica", SuperuserFromNetwork: true})
	if strings.Contains(open, `"postgres" all reject`) {
		t.Errorf("superuser from the network allowed, yet:\n%s", open)
	}
	for _, line := range []string{
		"hostnossl all all all reject",
		`hostssl replication "streaming_replica" all scram-sha-256 clientcert=verify-full`,
		"hostssl all all all scram-sha-256",
	} {
		if !strings.Contains(open, line+"\n") {
			t.Errorf("pg_hba.conf lacks %q:\n%s", line, open)
		}
	}
	// Every line that takes a login from the network is hostssl; plain host only over loopback.
	for _, line := range strings.Split(open, "\n") {
		if strings.HasPrefix(line, "host ") && !strings.Contains(line, "127.0.0.1/32") && !strings.Contains(line, "::1/128") && !strings.HasSuffix(line, "reject") {
			t.Errorf("plaintext from the network: %q", line)
		}
	}
	closed := HBA(Auth{Superuser: "postgres", Replication: "streaming_replica"})
	loopback := strings.Index(closed, `host all "postgres" 127.0.0.1/32 scram-sha-256`)
	reject := strings.Index(closed, `host all "postgres" all reject`)
	all := strings.Index(closed, "hostssl all all all")
	if loopback < 0 || reject < loopback || all < reject {
		t.Errorf("superuser not limited to loopback before the general rule:\n%s", closed)
	}
	if strings.Contains(open+closed, "trust") || strings.Contains(open+closed, "md5") {
		t.Error("pg_hba.conf allows a method other than SCRAM")
	}
}

func TestConninfoQuoting(t *testing.T) {
	s := Standby{Upstream: Upstream{Host: "10.0.0.1", Port: "5432", ServerName: "db-rw.ns.svc", TLS: TLSPaths("/v/pgdata")},
		User: "repl", Passfile: `/v/it's a \ file`, ApplicationName: "west-1"}
	got := s.Conninfo()
	for _, want := range []string{`passfile='/v/it\'s a \\ file'`, "sslmode=verify-full", "sslrootcert='/v/.dbfleet-tls/ca.crt'",
		"sslcert='/v/.dbfleet-tls/replication.crt'", "sslkey='/v/.dbfleet-tls/replication.key'"} {
		if !strings.Contains(got, want) {
			t.Errorf("Conninfo lacks %s: %s", want, got)
		}
	}
	// In postgresql.conf the whole conninfo is one string, its quotes doubled. An address is
	// dialled (hostaddr) and the server name verified (host).
	if q := Quote(got); !strings.HasPrefix(q, "'host=''db-rw.ns.svc'' hostaddr=''10.0.0.1''") {
		t.Errorf("Quote(conninfo) = %s", q)
	}
	// A name is dialled and verified as it is.
	s.Host = "db-rw.ns.svc.clusterset.local"
	if got := s.Conninfo(); !strings.HasPrefix(got, "host='db-rw.ns.svc.clusterset.local' port=") {
		t.Errorf("Conninfo for a name: %s", got)
	}
}

// TestWriteStandbyKeepsThePasswordOutOfTheConfiguration: the replication password goes to a
// password file beside the data directory (0600), never into the configuration, whose changes the
// server logs with their values; the file keeps its name while the password does, and takes a
// new one when it changes, so that primary_conninfo changes and the walreceiver logs in again.
func TestWriteStandbyKeepsThePasswordOutOfTheConfiguration(t *testing.T) {
	volume := t.TempDir()
	dir := filepath.Join(volume, "pgdata")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := Standby{Upstream: Upstream{Host: "10.0.0.1", Port: "5432"}, User: "repl", Password: "pw:one", ApplicationName: "west-1", SlotName: "dbfleet_west_1"}
	passfile := func() string {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(volume, replicationPassfilePrefix+"*"))
		if len(files) != 1 {
			t.Fatalf("password files %v, want one", files)
		}
		data, _ := os.ReadFile(files[0])
		info, _ := os.Stat(files[0])
		if string(data) != PassfileLine(s.Host, s.Port, s.User, s.Password) || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s holds %q (mode %v)", files[0], data, info.Mode().Perm())
		}
		conf, _ := os.ReadFile(filepath.Join(dir, StandbyConfFile))
		if strings.Contains(string(conf), "pw") || !strings.Contains(string(conf), "passfile=''"+files[0]+"''") {
			t.Fatalf("%s:\n%s", StandbyConfFile, conf)
		}
		return files[0]
	}
	if _, err := WriteStandby(dir, s, nil); err != nil {
		t.Fatal(err)
	}
	first := passfile()
	if changed, err := WriteStandby(dir, s, nil); err != nil || changed || passfile() != first {
		t.Fatalf("the same standby again: changed %v, %v", changed, err)
	}
	s.Password = "pw:two"
	if changed, err := WriteStandby(dir, s, nil); err != nil || !changed || passfile() == first {
		t.Fatalf("a new password: changed %v, %v; want a new password file", changed, err)
	}
	if _, err := WriteStandby(dir, Standby{}, nil); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(volume, replicationPassfilePrefix+"*")); len(files) != 0 {
		t.Errorf("following nobody, password files %v remain", files)
	}
	if got := PassfileLine("::1", "5432", `a\b`, "p:w"); got != `\:\:1:5432:*:a\\b:p\:w`+"\n" {
		t.Errorf("PassfileLine = %q", got)
	}
}

func TestWriteStandbyReportsChanges(t *testing.T) {
	dir := t.TempDir()
	s := Standby{Upstream: Upstream{Host: "10.0.0.1", Port: "5432"}, User: "repl", Password: "pw", ApplicationName: "west-1", SlotName: "dbfleet_west_1"}
	for i, tt := range []struct {
		s       Standby
		changed bool
	}{{s, true}, {s, false}, {Standby{Upstream: Upstream{Host: "10.0.0.2", Port: "5432"}, User: "repl", Password: "pw", ApplicationName: "west-1", SlotName: "dbfleet_west_1"}, true}} {
		changed, err := WriteStandby(dir, tt.s, nil)
		if err != nil || changed != tt.changed {
			t.Fatalf("write %d: changed=%v err=%v, want changed=%v", i, changed, err, tt.changed)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, StandbyConfFile))
	if !strings.Contains(string(b), "10.0.0.2") || !strings.Contains(string(b), "primary_slot_name = 'dbfleet_west_1'") {
		t.Errorf("%s:\n%s", StandbyConfFile, b)
	}
}

func TestStateIgnoresAnotherPodsCopy(t *testing.T) {
	dir := t.TempDir()
	if err := WriteState(dir, State{Pod: "east-0", PromotedEpoch: 3, FencedEpoch: 2}, nil); err != nil {
		t.Fatal(err)
	}
	if s, err := ReadState(dir, "east-0"); err != nil || s.PromotedEpoch != 3 || s.FencedEpoch != 2 {
		t.Fatalf("own state = %+v, %v", s, err)
	}
	if s, err := ReadState(dir, "west-1"); err != nil || s.PromotedEpoch != 0 || s.FencedEpoch != 0 {
		t.Fatalf("another pod's state = %+v, %v; want it ignored", s, err)
	}
}

func TestWriteArchives(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "postgresql.conf"), nil, 0o600); err != nil { // as initdb leaves it
		t.Fatal(err)
	}
	base := Settings{Port: 5432, ListenAddresses: "*", ClusterName: "db-0", TLS: TLSPaths(dir)}
	auth := Auth{Superuser: "postgres", Replication: "streaming_replica"}
	if err := Write(dir, base, auth, nil); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, ConfFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), "archive_mode") || !strings.Contains(string(conf), "unix_socket_directories = ''\n") {
		t.Errorf("without a repository: archiving or a socket:\n%s", conf)
	}
	if strings.Contains(HBA(auth), "local ") {
		t.Errorf("without a repository, a socket login:\n%s", HBA(auth))
	}

	base.Archive = &Archive{Command: "/dbfleet/dbfleet-instance wal-archive %p", Timeout: time.Minute, SocketDir: "/v/run"}
	auth.SuperuserBySocket = true
	if err := Write(dir, base, auth, nil); err != nil {
		t.Fatal(err)
	}
	if conf, err = os.ReadFile(filepath.Join(dir, ConfFile)); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"archive_mode = on", "archive_command = '/dbfleet/dbfleet-instance wal-archive %p'",
		"archive_timeout = '60s'", "unix_socket_directories = '/v/run'", "unix_socket_permissions = 0700"} {
		if strings.Count(string(conf), line+"\n") != 1 {
			t.Errorf("dbfleet.conf lacks %q once:\n%s", line, conf)
		}
	}
	if strings.Count(string(conf), "unix_socket_directories") != 1 {
		t.Errorf("unix_socket_directories set twice:\n%s", conf)
	}
	hba := HBA(auth)
	if local := strings.Index(hba, `local all "postgres" scram-sha-256`); local < 0 || strings.Contains(hba, "local all all") {
		t.Errorf("the socket takes the superuser alone, with SCRAM:\n%s", hba)
	}
}
