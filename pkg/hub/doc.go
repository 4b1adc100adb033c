// Package hub holds what the hub's controllers share: their Config, the Registry from which
// `hub run --controllers` picks them, and the hub's own namespace. Each controller is a
// sub-package: databasecluster (policy matching, scheduling, propagation to member-<cluster>,
// status aggregation, eviction, failover and deletion), clusterhealth (MemberCluster health and
// taints: a Pull member's from its agent's Lease renewals, a Push member's from the hub's probes
// of its API server) and push (drives Push-mode members through multicluster-runtime's
// kubeconfig provider with the agent's member reconciler). liveness is the hub's memory of when
// it last saw each member alive, which clusterhealth feeds and databasecluster's failover gate
// reads.
package hub
