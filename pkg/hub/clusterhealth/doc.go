// Package clusterhealth is the hub's judgement of member clusters, and the writer of their status.
// It watches each agent's Lease in member-<cluster> and notes, on the hub's own monotonic clock,
// when it last saw the renew time change; it never compares the agent's timestamps with its own
// clock. It copies each agent's MemberClusterReport (member-<cluster>/<cluster>: settings, version,
// capacity, the member's health) into the MemberCluster's status. A cluster not seen renewing for
// the grace period is Ready=Unknown (AgentLeaseExpired) and tainted dbfleet.io/unreachable; a
// cluster whose agent reports its member API server unhealthy (Ready=False) is tainted
// dbfleet.io/not-ready. Taints carry timeAdded, from which policies' tolerations run, and go away
// with the condition.
package clusterhealth
