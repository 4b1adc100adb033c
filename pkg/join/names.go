package join

import (
	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/images"
)

// Names and labels of the objects join creates. Users and the agent rely on them.
const (
	// FieldManager owns the fields join writes with server-side apply.
	FieldManager = "dbfleet-hub-join"

	// LabelManagedBy marks every hub object join created, with the value ManagedByJoin.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByJoin is the value of LabelManagedBy on the objects join created.
	ManagedByJoin = "dbfleet-hub-join"

	// AgentName names the agent's ServiceAccount, Role and RoleBinding in member-<name> on the hub,
	// and its ServiceAccount, ClusterRole, ClusterRoleBinding and Deployment in the member.
	AgentName = "dbfleet-agent"
	// SystemNamespace holds the agent in a member cluster. (On the hub, the Push clusters'
	// kubeconfig Secrets live in the hub's own namespace, hub.Namespace, under the names its push
	// controller reads: push.SecretName, push.SecretLabel, push.SecretKey.)
	SystemNamespace = "dbfleet-system"
	// HubKubeconfigSecret is the member-side Secret holding the agent's hub kubeconfig.
	HubKubeconfigSecret = "dbfleet-agent-hub-kubeconfig"
	// KubeconfigKey is the key of HubKubeconfigSecret holding the agent's hub kubeconfig.
	KubeconfigKey = "kubeconfig"
	// HubKubeconfigMountPath is where the agent's Deployment mounts HubKubeconfigSecret.
	HubKubeconfigMountPath = "/etc/dbfleet/hub"

	// DefaultAgentImage is the agent image the manifests use unless told otherwise.
	DefaultAgentImage = images.Agent
	// MaxNameLength bounds cluster names so that member-<name> and dbfleet-agent-<name> stay valid.
	MaxNameLength = 56
)

// ClusterRoleName is the hub ClusterRole (and ClusterRoleBinding) with which joins before the
// MemberClusterReport let a cluster's agent read its own MemberCluster and write its status. Join
// no longer creates them; join and unjoin delete them.
func ClusterRoleName(cluster string) string { return AgentName + "-" + cluster }

// hubLabels are the labels of every hub object join creates for a cluster.
func hubLabels(cluster string) map[string]string {
	return map[string]string{
		dbfleetv1alpha1.LabelCluster: cluster,
		LabelManagedBy:               ManagedByJoin,
	}
}
