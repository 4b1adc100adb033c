// Package clusterhealth is the hub's judgement of member clusters, and the writer of their status.
//
// A Pull cluster's health comes from its agent: the controller watches each agent's Lease in
// member-<cluster> and notes, on the hub's own monotonic clock, when it last saw the renew time
// change; it never compares the agent's timestamps with its own clock. It copies each agent's
// MemberClusterReport (member-<cluster>/<cluster>: settings, version, capacity, the member's
// health) into the MemberCluster's status. A cluster not seen renewing for the grace period is
// Ready=Unknown (AgentLeaseExpired); a cluster whose agent reports its member API server
// unhealthy is Ready=False.
//
// A Push cluster has no agent: the hub probes its API server itself (push.Prober, through the
// connection the kubeconfig provider engaged) every quarter of the grace period, with as long a
// timeout. An answer counts as the cluster seen alive, on the same Observer and clock; /readyz ok
// is Ready=True (MemberAPIServerReachable, with the member's version and capacity), any other
// answer Ready=False (MemberAPIServerNotReady), no answer for the grace period Ready=Unknown
// (MemberAPIServerUnreachable). AgentConnected is False with reason PushMode: it does not apply.
//
// Ready=Unknown taints the cluster dbfleet.io/unreachable, Ready=False dbfleet.io/not-ready.
// Taints carry timeAdded, from which policies' tolerations run, and go away with the condition.
package clusterhealth
