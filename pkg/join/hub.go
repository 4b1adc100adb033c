package join

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
)

// The hub objects of one joined cluster. Builders return complete objects; apply.go writes them.

const (
	groupDBFleet      = "dbfleet.io"
	groupCoordination = "coordination.k8s.io"
	groupEvents       = "events.k8s.io"
	groupRBAC         = rbacv1.GroupName
)

// memberCluster is the MemberCluster as join declares it. Fields join leaves empty (provider,
// labels given earlier and not now) are released on re-join; taints and anything else set by
// other field managers stay.
func memberCluster(o *Options, pushSecret *dbfleetv1alpha1.SecretReference) *dbfleetv1alpha1.MemberCluster {
	labels := hubLabels(o.Name)
	for k, v := range o.Labels {
		labels[k] = v
	}
	return &dbfleetv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Labels: labels},
		Spec: dbfleetv1alpha1.MemberClusterSpec{
			Region:              o.Region,
			Zone:                o.Zone,
			Provider:            o.Provider,
			SyncMode:            o.SyncMode,
			KubeconfigSecretRef: pushSecret,
		},
	}
}

// memberNamespace is member-<name>, which holds the cluster's MemberDatabases and Lease.
func memberNamespace(cluster string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   dbfleetv1alpha1.MemberNamespace(cluster),
		Labels: hubLabels(cluster),
	}}
}

// agentServiceAccount is the identity of the cluster's agent on the hub.
func agentServiceAccount(cluster string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Namespace: dbfleetv1alpha1.MemberNamespace(cluster),
		Name:      AgentName,
		Labels:    hubLabels(cluster),
	}}
}

func agentSubject(cluster string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: AgentName}
}

// AgentRoleRules are everything the agent's hub credential may do: all of it in member-<name>.
// Nothing is granted cluster-wide, not even the agent's own MemberCluster (the agent reports
// through its MemberClusterReport): the RBAC authorizer checks every request of every client
// against every ClusterRoleBinding's subjects, and at 1,000 clusters a binding per agent was 17 %
// of the hub API server's CPU at rest.
func AgentRoleRules(cluster string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{
			// The agent reads and watches its shares. update and patch are there only so that it can
			// add and remove its finalizer (dbfleet.io/agent-cleanup), by which the hub learns that a
			// deleted share is gone from the member; the spec is the hub's to write. Kubernetes RBAC
			// cannot narrow update to metadata.finalizers, so this is the narrowest rule that works.
			// create and delete are not granted: only the hub places and removes shares.
			APIGroups: []string{groupDBFleet},
			Resources: []string{"memberdatabases"},
			Verbs:     []string{"get", "list", "watch", "update", "patch"},
		},
		{
			APIGroups: []string{groupDBFleet},
			Resources: []string{"memberdatabases/status"},
			Verbs:     []string{"get", "update", "patch"},
		},
		{
			// The database credentials the hub carries here (<namespace>.<db>-superuser and so on),
			// which the agent writes into its member cluster. Only in member-<name>: the Role is
			// namespaced, so no other cluster's credentials are readable.
			APIGroups: []string{""},
			Resources: []string{"secrets"},
			Verbs:     []string{"get", "list", "watch"},
		},
		{
			// The heartbeat Lease, by name. Leases cannot be listed or watched.
			APIGroups:     []string{groupCoordination},
			Resources:     []string{"leases"},
			ResourceNames: []string{dbfleetv1alpha1.AgentLeaseName}, // the only Lease its credential can read or renew
			Verbs:         []string{"get", "update"},
		},
		{
			// RBAC cannot restrict create by resourceName (the name is not known when the request is
			// authorized), so the agent could create other Leases here; they are inert: nothing on the
			// hub reads them, and the agent can neither read nor renew them afterwards.
			APIGroups: []string{groupCoordination},
			Resources: []string{"leases"},
			Verbs:     []string{"create"},
		},
		{
			// The agent's report on its member cluster, which the hub copies into the MemberCluster's
			// status: named after the cluster. As with Leases, create cannot be narrowed by name; a
			// report under another name is inert (the hub reads only the cluster's own).
			APIGroups:     []string{groupDBFleet},
			Resources:     []string{"memberclusterreports"},
			ResourceNames: []string{cluster},
			Verbs:         []string{"get", "update", "patch"},
		},
		{
			APIGroups: []string{groupDBFleet},
			Resources: []string{"memberclusterreports"},
			Verbs:     []string{"create"},
		},
		{
			APIGroups: []string{"", groupEvents},
			Resources: []string{"events"},
			Verbs:     []string{"create", "patch"},
		},
		{
			// The agent renews its own token (pkg/agent/hubtoken): a token of its ServiceAccount
			// only, never of another.
			APIGroups:     []string{""},
			Resources:     []string{"serviceaccounts/token"},
			ResourceNames: []string{AgentName},
			Verbs:         []string{"create"},
		},
	}
}

func agentRole(cluster string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: AgentName, Labels: hubLabels(cluster)},
		Rules:      AgentRoleRules(cluster),
	}
}

func agentRoleBinding(cluster string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbfleetv1alpha1.MemberNamespace(cluster), Name: AgentName, Labels: hubLabels(cluster)},
		RoleRef:    rbacv1.RoleRef{APIGroup: groupRBAC, Kind: "Role", Name: AgentName},
		Subjects:   []rbacv1.Subject{agentSubject(cluster)},
	}
}

// legacyAgentGrant is the ClusterRoleBinding and ClusterRole ClusterRoleName(cluster), as keys to
// delete.
func legacyAgentGrant(cluster string) (*rbacv1.ClusterRoleBinding, *rbacv1.ClusterRole) {
	meta := metav1.ObjectMeta{Name: ClusterRoleName(cluster)}
	return &rbacv1.ClusterRoleBinding{ObjectMeta: meta}, &rbacv1.ClusterRole{ObjectMeta: meta}
}

// pushSecret holds a Push cluster's kubeconfig on the hub.
func pushSecret(cluster string, kubeconfig []byte) *corev1.Secret {
	labels := hubLabels(cluster)
	labels[push.SecretLabel] = "true"
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: hub.Namespace, Name: push.SecretName(cluster), Labels: labels},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{push.SecretKey: kubeconfig},
	}
}
