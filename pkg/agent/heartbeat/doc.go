// Package heartbeat keeps the hub informed that a member cluster's agent is alive: it renews the
// agent's Lease in member-<cluster> on the hub every interval, and writes the cluster's
// MemberClusterReport (Ready, Kubernetes version, agent settings, resource summary) when, and
// only when, it changed; the hub copies the report into the MemberCluster's status. The hub
// judges liveness from the Lease on its own clock; the agent never claims freshness with its own
// timestamps.
package heartbeat
