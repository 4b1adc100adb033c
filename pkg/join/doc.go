// Package join joins member clusters to the hub and removes them again: it is the logic behind
// `hub join` and `hub unjoin`.
//
// Joining a cluster in Pull mode creates, on the hub, the MemberCluster, the namespace
// member-<name> and a ServiceAccount in it whose RBAC reaches only that namespace's MemberDatabases
// (read, status, the agent's finalizer), the cluster's own heartbeat Lease and the cluster's own
// MemberCluster (read, status). It mints a token for that ServiceAccount with the TokenRequest API
// and renders the manifests that install the agent in the member cluster: a namespace, a Secret
// holding a kubeconfig for the hub, the agent's member-side RBAC and its Deployment.
//
// Joining again rotates the credential: the ServiceAccount is deleted and created anew, which
// invalidates every token bound to the old one. Unjoining deletes the ServiceAccount, the
// cluster-wide RBAC, the member namespace and the MemberCluster.
//
// In Push mode the hub reconciles the member itself through a kubeconfig that join stores in a hub
// Secret; no agent credential is created.
//
// Every object join creates on the hub carries the labels dbfleet.io/cluster=<name> and
// app.kubernetes.io/managed-by=dbfleet-hub-join, and is written with server-side apply under the
// field manager dbfleet-hub-join, so re-running join converges instead of failing.
package join
