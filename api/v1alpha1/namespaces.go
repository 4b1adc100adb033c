package v1alpha1

import (
	"fmt"
	"strings"
)

// A database's objects live in the namespace of its DatabaseCluster, on the hub and in every
// member it is placed in. Some namespaces must never hold them: a user allowed to create a
// DatabaseCluster in a hub namespace named like a member's system namespace would otherwise get
// pods of any image there, in every member. The hub refuses such DatabaseClusters (an admission
// policy in its chart, and the controllers), the agent refuses such shares (an admission policy
// bound to its ServiceAccount, and the agent itself). The CEL of both policies says the same as
// these functions; test/integration/crds checks that they agree.

// ReservedMemberNamespace says why a member cluster's namespace may hold no database ("" when it
// may): the cluster's own (kube-*), the default namespace, and dbfleet's (dbfleet-*, where the
// agent runs).
func ReservedMemberNamespace(ns string) string {
	switch {
	case strings.HasPrefix(ns, "kube-"):
		return "namespaces kube-* belong to Kubernetes"
	case ns == "default":
		return "the default namespace holds what nobody placed on purpose"
	case strings.HasPrefix(ns, "dbfleet-"):
		return "namespaces dbfleet-* are dbfleet's own"
	}
	return ""
}

// ReservedHubNamespace says why a hub namespace may hold no DatabaseCluster ("" when it may): the
// member namespaces' reasons, and member-* (each member's agent reads the Secrets of its own
// member-<cluster> namespace, so a database there would hand its credentials to that agent).
func ReservedHubNamespace(ns string) string {
	if strings.HasPrefix(ns, MemberNamespacePrefix) {
		return "namespaces member-* hold each member cluster's objects, readable by its agent"
	}
	return ReservedMemberNamespace(ns)
}

// DatabaseClusterNamespaceRefusal is what the hub says of a DatabaseCluster in namespace ns when
// it places nothing for it (Scheduled False, ReasonReservedNamespace), or "" when ns may hold one.
func DatabaseClusterNamespaceRefusal(ns string) string {
	why := ReservedHubNamespace(ns)
	if why == "" {
		return ""
	}
	return fmt.Sprintf("namespace %s may hold no database (%s): create the DatabaseCluster in a namespace of its own", ns, why)
}
