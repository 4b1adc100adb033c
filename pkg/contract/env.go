package contract

// The environment the agent gives the instance manager's container; each variable is the default
// of the instance manager's flag of the same meaning (a test or a person passes flags instead).
const (
	EnvPodName              = "DBFLEET_POD_NAME"
	EnvNamespace            = "DBFLEET_NAMESPACE"
	EnvCluster              = "DBFLEET_CLUSTER"
	EnvDatabase             = "DBFLEET_DATABASE"
	EnvKubeconfig           = "KUBECONFIG"
	EnvDataVolume           = "DBFLEET_DATA_VOLUME"
	EnvHTTPPort             = "DBFLEET_HTTP_PORT"
	EnvPostgresPort         = "DBFLEET_POSTGRES_PORT"
	EnvListenAddresses      = "DBFLEET_LISTEN_ADDRESSES"
	EnvBinDir               = "DBFLEET_BIN_DIR"
	EnvSuperuserSecretDir   = "DBFLEET_SUPERUSER_SECRET_DIR"
	EnvReplicationSecretDir = "DBFLEET_REPLICATION_SECRET_DIR"
	EnvAppSecretDir         = "DBFLEET_APP_SECRET_DIR"
	EnvTLSSecretDir         = "DBFLEET_TLS_SECRET_DIR"
	EnvRunAs                = "DBFLEET_RUN_AS"
	EnvSuperuserFromNetwork = "DBFLEET_SUPERUSER_FROM_NETWORK"
	EnvPollInterval         = "DBFLEET_POLL_INTERVAL"
	EnvFailsafe             = "DBFLEET_FAILSAFE"
	// EnvBackupDir is where the backup repository is described (BackupKey* files); unset: no
	// backups, no archiving.
	EnvBackupDir      = "DBFLEET_BACKUP_DIR"
	EnvArchiveTimeout = "DBFLEET_ARCHIVE_TIMEOUT"
)

// The keys of a credentials Secret (<db>-superuser, <db>-replication, <db>-app). The hub writes
// them (or checks a user's Secret has them); the agent mounts each Secret into the instance's
// container, where every key is a file of that name.
const (
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
	SecretKeyDBName   = "dbname"
	SecretKeyURI      = "uri"
)

// The keys of a database's TLS Secret (<db>-tls), cert-manager's names for the first three: the
// instances' server certificate and key, the CA that signs everything of the database (which the
// <db>-app Secret carries too, for clients), the replication role's client certificate, and the
// client certificate with which the agent reads the instances' /status (StatusClientName; the
// instances' pods do not mount it).
const (
	SecretKeyTLSCert          = "tls.crt"
	SecretKeyTLSKey           = "tls.key"
	SecretKeyCACert           = "ca.crt"
	SecretKeyReplicationCert  = "replication.crt"
	SecretKeyReplicationKey   = "replication.key"
	SecretKeyStatusClientCert = "agent.crt"
	SecretKeyStatusClientKey  = "agent.key"
)

// InstanceTLSKeys are the keys of <db>-tls an instance's pod mounts: all but the agent's.
var InstanceTLSKeys = []string{SecretKeyTLSCert, SecretKeyTLSKey, SecretKeyCACert, SecretKeyReplicationCert, SecretKeyReplicationKey}

// StatusClientName is the common name of the client certificate the agent shows an instance
// manager's HTTPS port: /status answers only a certificate of the database's CA with this name
// (the port's /healthz and /readyz answer anyone, for the kubelet's probes).
const StatusClientName = "dbfleet-agent"

// TLSServerName is the name every instance of a database presents in its server certificate and
// the name its standbys verify (sslmode=verify-full, host=<this> hostaddr=<the primary's
// address>): its read-write Service in the database's namespace.
func TLSServerName(database, namespace string) string {
	return database + "-rw." + namespace + ".svc"
}

// The files of the backup repository's directory (EnvBackupDir): one value each, as a mounted
// ConfigMap and Secret give them. BackupKeyCA is optional (the system's CAs otherwise).
const (
	BackupKeyEndpoint        = "endpoint"
	BackupKeyBucket          = "bucket"
	BackupKeyPath            = "path"
	BackupKeyRegion          = "region"
	BackupKeyAccessKeyID     = "ACCESS_KEY_ID"
	BackupKeySecretAccessKey = "SECRET_ACCESS_KEY"
	BackupKeyCA              = "ca.crt"
)
