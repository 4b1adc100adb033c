package instance

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/pgbackrest"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
	"github.com/dbfleet/dbfleet/pkg/instance/pgsql"
)

// DataDirName is the data directory inside the volume: never the volume root, which may hold
// lost+found (initdb refuses a non-empty directory).
const DataDirName = "pgdata"

// Defaults.
const (
	DefaultPostgresPort = 5432
	DefaultRunAs        = "postgres"
	DefaultPollInterval = time.Second
	// DefaultArchiveTimeout bounds what a loss of every member loses beside the segment in flight.
	DefaultArchiveTimeout = time.Minute
)

// Options configure one instance manager.
type Options struct {
	PodName, Namespace, Cluster, Database string
	// Kubeconfig is empty in a pod (in-cluster configuration).
	Kubeconfig string
	// DataVolume holds the data directory DataVolume/pgdata.
	DataVolume string
	HTTPPort   int
	// PostgresPort and ListenAddresses are postgres' port and listen_addresses.
	PostgresPort    int
	ListenAddresses string
	// BinDir holds the server binaries; empty: PATH, then /usr/lib/postgresql/<major>/bin.
	BinDir string
	// The directories where the superuser, replication and app Secrets are mounted.
	SuperuserSecretDir, ReplicationSecretDir, AppSecretDir string
	// TLSSecretDir is where the <db>-tls Secret is mounted: the server certificate and key, the
	// CA, the replication role's client certificate and key.
	TLSSecretDir string
	// RunAs is the user postgres runs as when the manager runs as root (postgres refuses root).
	RunAs string
	// SuperuserFromNetwork lets the superuser log in from other hosts (with its password).
	SuperuserFromNetwork bool
	// PollInterval is how often the Pod and the Lease are read.
	PollInterval time.Duration
	// Failsafe lets a running primary whose Lease can no longer be renewed go on taking writes
	// while it hears every standby (decide.JudgeFailsafe): the hub, the agent and the link
	// between them are then out of the write path. On by default; off, a primary stops at its
	// Lease's deadline whatever it hears. The silence a failover waits for is kept either way.
	Failsafe bool
	// BackupDir describes the backup repository (contract.BackupKey* files); empty: no backups,
	// and the primary archives nothing.
	BackupDir string
	// ArchiveTimeout is archive_timeout: with writes, a segment goes to the repository at least
	// this often.
	ArchiveTimeout time.Duration
	// PGBackRest is the pgbackrest program.
	PGBackRest string
}

// AddFlags registers the options on fs, each defaulting to its environment variable.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PodName, "pod-name", os.Getenv(contract.EnvPodName), "Name of this instance's Pod (also its replication application_name). Env "+contract.EnvPodName+".")
	fs.StringVar(&o.Namespace, "namespace", os.Getenv(contract.EnvNamespace), "Namespace of the Pod and of the primary Lease. Env "+contract.EnvNamespace+".")
	fs.StringVar(&o.Cluster, "cluster", os.Getenv(contract.EnvCluster), "Name of the member cluster: the Lease holder is <cluster>/<epoch>. Env "+contract.EnvCluster+".")
	fs.StringVar(&o.Database, "database", os.Getenv(contract.EnvDatabase), "Name of the DatabaseCluster: the Lease is dbfleet-primary-<database>. Env "+contract.EnvDatabase+".")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", os.Getenv(contract.EnvKubeconfig), "Kubeconfig of the member cluster; empty: in-cluster configuration. Env "+contract.EnvKubeconfig+".")
	fs.StringVar(&o.DataVolume, "data-volume", os.Getenv(contract.EnvDataVolume), "Mount point of the data volume; the data directory is <volume>/"+DataDirName+". Env "+contract.EnvDataVolume+".")
	fs.IntVar(&o.HTTPPort, "http-port", envInt(contract.EnvHTTPPort, contract.Port), "Port of /healthz, /readyz and /status. Env "+contract.EnvHTTPPort+".")
	fs.IntVar(&o.PostgresPort, "postgres-port", envInt(contract.EnvPostgresPort, DefaultPostgresPort), "Port postgres listens on. Env "+contract.EnvPostgresPort+".")
	fs.StringVar(&o.ListenAddresses, "listen-addresses", envString(contract.EnvListenAddresses, "*"), "postgres listen_addresses. Env "+contract.EnvListenAddresses+".")
	fs.StringVar(&o.BinDir, "bin-dir", os.Getenv(contract.EnvBinDir), "Directory of the postgres server binaries; empty: PATH, then /usr/lib/postgresql/<major>/bin. Env "+contract.EnvBinDir+".")
	fs.StringVar(&o.SuperuserSecretDir, "superuser-secret-dir", os.Getenv(contract.EnvSuperuserSecretDir), "Directory where the <db>-superuser Secret is mounted (files username, password). Env "+contract.EnvSuperuserSecretDir+".")
	fs.StringVar(&o.ReplicationSecretDir, "replication-secret-dir", os.Getenv(contract.EnvReplicationSecretDir), "Directory where the <db>-replication Secret is mounted. Env "+contract.EnvReplicationSecretDir+".")
	fs.StringVar(&o.AppSecretDir, "app-secret-dir", os.Getenv(contract.EnvAppSecretDir), "Directory where the <db>-app Secret is mounted (files username, password, dbname). Env "+contract.EnvAppSecretDir+".")
	fs.StringVar(&o.TLSSecretDir, "tls-secret-dir", os.Getenv(contract.EnvTLSSecretDir), "Directory where the <db>-tls Secret is mounted (files tls.crt, tls.key, ca.crt, replication.crt, replication.key). Env "+contract.EnvTLSSecretDir+".")
	fs.StringVar(&o.RunAs, "run-as", envString(contract.EnvRunAs, DefaultRunAs), "User postgres runs as when the manager runs as root. Env "+contract.EnvRunAs+".")
	fs.BoolVar(&o.SuperuserFromNetwork, "superuser-from-network", envBool(contract.EnvSuperuserFromNetwork, false), "Let the superuser log in from other hosts (with its password); by default only over loopback (the manager, a kubectl exec). Env "+contract.EnvSuperuserFromNetwork+".")
	fs.DurationVar(&o.PollInterval, "poll-interval", envDuration(contract.EnvPollInterval, DefaultPollInterval), "How often the Pod and the primary Lease are read. Env "+contract.EnvPollInterval+".")
	fs.StringVar(&o.BackupDir, "backup-dir", os.Getenv(contract.EnvBackupDir), "Directory describing the backup repository (files endpoint, bucket, path, region, ACCESS_KEY_ID, SECRET_ACCESS_KEY, optional ca.crt); empty: no backups, no WAL archive. Env "+contract.EnvBackupDir+".")
	fs.DurationVar(&o.ArchiveTimeout, "archive-timeout", envDuration(contract.EnvArchiveTimeout, DefaultArchiveTimeout), "archive_timeout: with writes, WAL reaches the repository at least this often. Env "+contract.EnvArchiveTimeout+".")
	fs.StringVar(&o.PGBackRest, "pgbackrest", "pgbackrest", "The pgbackrest program.")
	fs.BoolVar(&o.Failsafe, "failsafe", envBool(contract.EnvFailsafe, true), "Keep a primary whose Lease can no longer be renewed taking writes while it hears every standby (docs/failover.md); false: it stops at the Lease's deadline. Env "+contract.EnvFailsafe+".")
}

// Validate rejects options the manager cannot run with.
func (o *Options) Validate() error {
	var errs []error
	for name, v := range map[string]string{"--pod-name": o.PodName, "--namespace": o.Namespace, "--cluster": o.Cluster,
		"--database": o.Database, "--data-volume": o.DataVolume, "--superuser-secret-dir": o.SuperuserSecretDir,
		"--replication-secret-dir": o.ReplicationSecretDir, "--app-secret-dir": o.AppSecretDir,
		"--tls-secret-dir": o.TLSSecretDir} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	if o.PollInterval <= 0 {
		errs = append(errs, errors.New("--poll-interval must be positive"))
	}
	if o.BackupDir != "" && o.ArchiveTimeout < time.Second {
		errs = append(errs, fmt.Errorf("--archive-timeout %s: at least 1s", o.ArchiveTimeout))
	}
	return errors.Join(errs...)
}

// DataDir is the data directory.
func (o *Options) DataDir() string { return filepath.Join(o.DataVolume, DataDirName) }

// credentials are the three roles' logins and the TLS material.
type credentials struct {
	superuser, replication, app pgsql.Credentials
	tls                         pgconf.TLS
}

func (o *Options) readCredentials() (credentials, error) {
	var c credentials
	var err error
	if c.superuser, err = readSecretDir(o.SuperuserSecretDir, false); err != nil {
		return c, err
	}
	if c.replication, err = readSecretDir(o.ReplicationSecretDir, false); err != nil {
		return c, err
	}
	if c.app, err = readSecretDir(o.AppSecretDir, true); err != nil {
		return c, err
	}
	if c.tls, err = readTLSDir(o.TLSSecretDir); err != nil {
		return c, err
	}
	return c, nil
}

// readTLSDir reads the mounted <db>-tls Secret and checks that each certificate goes with its
// key and that the CA is readable; its errors never quote a key.
func readTLSDir(dir string) (pgconf.TLS, error) {
	var t pgconf.TLS
	for _, f := range []struct {
		key string
		to  *string
	}{
		{contract.SecretKeyTLSCert, &t.ServerCert}, {contract.SecretKeyTLSKey, &t.ServerKey},
		{contract.SecretKeyCACert, &t.CACert},
		{contract.SecretKeyReplicationCert, &t.ClientCert}, {contract.SecretKeyReplicationKey, &t.ClientKey},
	} {
		b, err := os.ReadFile(filepath.Join(dir, f.key))
		if err != nil {
			return t, fmt.Errorf("read TLS Secret key %s: %w", f.key, err)
		}
		*f.to = string(b)
	}
	if _, err := tls.X509KeyPair([]byte(t.ServerCert), []byte(t.ServerKey)); err != nil {
		return t, fmt.Errorf("TLS Secret in %s: %s and %s: %w", dir, contract.SecretKeyTLSCert, contract.SecretKeyTLSKey, err)
	}
	if _, err := tls.X509KeyPair([]byte(t.ClientCert), []byte(t.ClientKey)); err != nil {
		return t, fmt.Errorf("TLS Secret in %s: %s and %s: %w", dir, contract.SecretKeyReplicationCert, contract.SecretKeyReplicationKey, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM([]byte(t.CACert)) {
		return t, fmt.Errorf("TLS Secret in %s: %s holds no certificate", dir, contract.SecretKeyCACert)
	}
	return t, nil
}

func readSecretDir(dir string, needDB bool) (pgsql.Credentials, error) {
	read := func(key string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, key))
		if err != nil {
			return "", fmt.Errorf("read Secret key %s: %w", key, err)
		}
		v := strings.TrimRight(string(b), "\r\n")
		if problem := contract.CredentialProblem(key, v); problem != "" {
			return "", fmt.Errorf("secret key %s in %s %s", key, dir, problem)
		}
		return v, nil
	}
	var c pgsql.Credentials
	var err error
	if c.Username, err = read(contract.SecretKeyUsername); err != nil {
		return c, err
	}
	if c.Password, err = read(contract.SecretKeyPassword); err != nil {
		return c, err
	}
	if needDB {
		if c.DBName, err = read(contract.SecretKeyDBName); err != nil {
			return c, err
		}
	}
	return c, nil
}

// runAs resolves who postgres runs as: nobody else when the manager is not root.
func (o *Options) runAs() (*syscall.Credential, *pgconf.Owner, error) {
	if os.Geteuid() != 0 {
		return nil, nil, nil
	}
	if o.RunAs == "" {
		return nil, nil, errors.New("running as root: --run-as must name the user postgres runs as (postgres refuses root)")
	}
	u, err := user.Lookup(o.RunAs)
	if err != nil {
		if u, err = user.LookupId(o.RunAs); err != nil {
			return nil, nil, fmt.Errorf("look up user %s: %w", o.RunAs, err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, nil, fmt.Errorf("uid of %s: %w", o.RunAs, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, nil, fmt.Errorf("gid of %s: %w", o.RunAs, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true},
		&pgconf.Owner{UID: int(uid), GID: int(gid)}, nil
}

func envString(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return n
	}
	return def
}

func envBool(key string, def bool) bool {
	if b, err := strconv.ParseBool(os.Getenv(key)); err == nil {
		return b
	}
	return def
}

func envDuration(key string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return d
	}
	return def
}

// readBackup reads the backup repository's description from BackupDir.
func (o *Options) readBackup() (pgbackrest.Repo, error) {
	read := func(key string, optional bool) (string, error) {
		b, err := os.ReadFile(filepath.Join(o.BackupDir, key))
		if errors.Is(err, os.ErrNotExist) && optional {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("backup repository: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	var r pgbackrest.Repo
	var err error
	for _, f := range []struct {
		key string
		to  *string
	}{{contract.BackupKeyEndpoint, &r.Endpoint}, {contract.BackupKeyBucket, &r.Bucket}, {contract.BackupKeyPath, &r.Path},
		{contract.BackupKeyRegion, &r.Region}, {contract.BackupKeyAccessKeyID, &r.AccessKeyID}, {contract.BackupKeySecretAccessKey, &r.SecretAccessKey}} {
		if *f.to, err = read(f.key, false); err != nil {
			return r, err
		}
	}
	if ca, err := read(contract.BackupKeyCA, true); err != nil {
		return r, err
	} else if ca != "" {
		r.CAFile = filepath.Join(o.BackupDir, contract.BackupKeyCA)
	}
	if err := r.Validate(); err != nil {
		return r, fmt.Errorf("backup repository in %s: %w", o.BackupDir, err)
	}
	return r, nil
}
