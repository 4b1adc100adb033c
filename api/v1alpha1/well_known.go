package v1alpha1

// Labels the agent puts on the objects it manages in a member cluster.
const (
	// LabelDatabase names the DatabaseCluster an object belongs to.
	LabelDatabase = "dbfleet.io/database"
	// LabelEpoch is the primary epoch a StatefulSet was last reconciled for.
	LabelEpoch = "dbfleet.io/epoch"
	// LabelCluster names the member cluster on MemberDatabases and on member-side objects.
	LabelCluster = "dbfleet.io/cluster"
)

// Taints the hub puts on MemberClusters whose health it doubts.
const (
	// TaintClusterUnreachable is set while the cluster's Ready condition is Unknown.
	TaintClusterUnreachable = "dbfleet.io/unreachable"
	// TaintClusterNotReady is set while the cluster's Ready condition is False.
	TaintClusterNotReady = "dbfleet.io/not-ready"
)

// Finalizers.
const (
	// DatabaseClusterFinalizer keeps a DatabaseCluster until every member has cleaned up its share.
	DatabaseClusterFinalizer = "dbfleet.io/member-cleanup"
	// MemberDatabaseFinalizer is the agent's: it keeps a MemberDatabase until the agent has removed
	// the share's objects from its member cluster, which is how the hub learns cleanup is done.
	// The hub sets it when it creates the MemberDatabase; the agent adds it if it is missing.
	MemberDatabaseFinalizer = "dbfleet.io/agent-cleanup"
)

// AnnotationForceDelete on a DatabaseCluster being deleted makes the hub stop waiting for member
// agents to confirm cleanup: it removes their finalizers itself. Whatever a silent member still
// runs is then left behind.
const AnnotationForceDelete = "dbfleet.io/force-delete"

// AnnotationRebalance on a DatabaseCluster asks the hub for a full re-placement: whenever its
// value changes (a timestamp is a good value), the hub adopts the placement the policy calls for
// now, even if that moves replicas between healthy clusters. Without it, the hub moves replicas
// only when the DatabaseCluster or its policy changes or a cluster fails: nothing moves back to a
// cluster that returns on its own.
const AnnotationRebalance = "dbfleet.io/rebalance"

// LabelEvicting marks a MemberDatabase whose share left the placement and is kept until it may be
// purged (see DatabaseClusterStatus.Evictions).
const LabelEvicting = "dbfleet.io/evicting"

// LabelDatabaseNamespace names the namespace of the DatabaseCluster a MemberDatabase belongs to
// (LabelDatabase holds its name).
const LabelDatabaseNamespace = "dbfleet.io/database-namespace"

// MemberDatabaseName is the name of a DatabaseCluster's MemberDatabase in every member namespace:
// "<namespace>.<name>", unique because both parts are DNS labels.
func MemberDatabaseName(namespace, name string) string { return namespace + "." + name }

// MemberNamespacePrefix starts the name of the hub namespace that holds one cluster's objects:
// the MemberDatabases for cluster "east" live in "member-east".
const MemberNamespacePrefix = "member-"

// MemberNamespace returns the hub namespace holding the given cluster's MemberDatabases and Lease.
func MemberNamespace(cluster string) string { return MemberNamespacePrefix + cluster }

// AgentLeaseName is the agent's heartbeat Lease in member-<cluster> on the hub, labelled
// LabelCluster: the hub's cluster health controller reads its renewals, the agent renews it, and
// hub join grants the agent that one Lease. It lives here, with the other names both sides of
// that contract read, so that the agent need not import a hub controller (nor the hub the agent).
const AgentLeaseName = "dbfleet-agent"

// Condition types of MemberCluster.
const (
	// ConditionReady says whether the hub believes the cluster is healthy.
	ConditionReady = "Ready"
	// ConditionAgentConnected says whether the hub has observed the agent's heartbeat recently.
	ConditionAgentConnected = "AgentConnected"
)

// Reasons of the MemberCluster conditions. The hub's cluster health controller sets them, except
// the agent's own Ready reasons, which it copies from the agent's MemberClusterReport.
const (
	// ReasonAgentLeaseExpired (Ready Unknown, AgentConnected False): no renewal of a Pull
	// cluster's agent Lease observed within the grace period.
	ReasonAgentLeaseExpired = "AgentLeaseExpired"
	// ReasonLeaseRenewed (AgentConnected True): the hub observes the agent renew its Lease.
	ReasonLeaseRenewed = "LeaseRenewed"
	// ReasonAgentReady (Ready True, from the agent's report): the agent and its member API server
	// are healthy.
	ReasonAgentReady = "AgentReady"
	// ReasonMemberAPIServerUnhealthy (Ready False, from the agent's report): the agent cannot
	// reach its member API server.
	ReasonMemberAPIServerUnhealthy = "MemberAPIServerUnhealthy"

	// ReasonMemberAPIServerReachable (Ready True): the hub reaches a Push cluster's API server
	// and it answers /readyz with ok.
	ReasonMemberAPIServerReachable = "MemberAPIServerReachable"
	// ReasonMemberAPIServerNotReady (Ready False): a Push cluster's API server answers, but its
	// /readyz says it is not ready.
	ReasonMemberAPIServerNotReady = "MemberAPIServerNotReady"
	// ReasonMemberAPIServerUnreachable (Ready Unknown): the hub has not reached a Push cluster's
	// API server within the grace period.
	ReasonMemberAPIServerUnreachable = "MemberAPIServerUnreachable"
	// ReasonPushMode (AgentConnected False): a Push cluster has no agent; the hub drives it.
	ReasonPushMode = "PushMode"
)

// Credentials: the Secrets of a postgres DatabaseCluster.
const (
	// CredentialsSuperuser, CredentialsReplication and CredentialsApp are the three kinds of
	// credentials. The Secret of each is named "<database>-<kind>" in the DatabaseCluster's
	// namespace (a user may bring their own), and in each member cluster's database namespace.
	CredentialsSuperuser   = "superuser"
	CredentialsReplication = "replication"
	CredentialsApp         = "app"
	// CredentialsTLS is the instances' TLS material (<database>-tls: server certificate, CA,
	// the replication role's client certificate), which the hub issues from the CA in
	// <database>-ca (its own, or one the user brings there) and never carries that CA's key.
	CredentialsTLS = "tls"
	// CredentialsCA names the CA Secret (<database>-ca), which stays on the hub.
	CredentialsCA = "ca"

	// LabelCredentials names the kind of credentials a Secret holds. The hub puts it on the
	// Secrets it creates (never on a user's) and on the copies it carries into member-<cluster>,
	// where the agent finds them by it.
	LabelCredentials = "dbfleet.io/credentials"
)

// CredentialKinds are the kinds of credentials every postgres DatabaseCluster has in each member
// holding a share, in order.
var CredentialKinds = []string{CredentialsSuperuser, CredentialsReplication, CredentialsApp, CredentialsTLS}

// PasswordKinds are the credentials that are a role's login (username, password, dbname), which
// the hub makes with random passwords unless the user brought them.
var PasswordKinds = []string{CredentialsSuperuser, CredentialsReplication, CredentialsApp}

// CredentialsSecretName is the name of a database's Secret of the given kind, in the
// DatabaseCluster's namespace and in the member's database namespace: "<database>-<kind>".
func CredentialsSecretName(database, kind string) string { return database + "-" + kind }

// CarriedCredentialsSecretName is the name of the hub's copy of a credentials Secret in
// member-<cluster>: "<namespace>.<database>-<kind>", unique as MemberDatabase names are.
func CarriedCredentialsSecretName(namespace, database, kind string) string {
	return MemberDatabaseName(namespace, database) + "-" + kind
}
