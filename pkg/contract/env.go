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
	EnvRunAs                = "DBFLEET_RUN_AS"
	EnvSuperuserFromNetwork = "DBFLEET_SUPERUSER_FROM_NETWORK"
	EnvPollInterval         = "DBFLEET_POLL_INTERVAL"
	EnvFailsafe             = "DBFLEET_FAILSAFE"
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
