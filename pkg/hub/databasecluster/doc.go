// Package databasecluster is the hub's main control loop. For each DatabaseCluster it binds the
// winning (Cluster)PropagationPolicy, runs the placement engine over the MemberClusters, writes one
// MemberDatabase per chosen cluster into member-<cluster>, and aggregates what the agents report
// back into the DatabaseCluster's status. A finalizer makes deletion wait until every member agent
// has confirmed the removal of its share.
//
// One reconciler owns the whole DatabaseCluster status, so its conditions never race; each step
// is a small function over a shared scope, and status is written once, only when it changed.
package databasecluster
