// Package databasecluster is the hub's main control loop. For each DatabaseCluster it runs
// scheduling (pkg/scheduling: the winning (Cluster)PropagationPolicy and the placement engine
// over the MemberClusters), holds a decision back while the old primary may still act (demotion,
// eviction, fencing, confirmed through the hub's liveness observer) or the eviction rate limit
// says so, writes one MemberDatabase per chosen cluster into member-<cluster>, and aggregates what
// the agents report back into the DatabaseCluster's status. A finalizer makes deletion wait until
// every member agent has confirmed the removal of its share.
//
// A decision that moves the primary is a primaryMove (primarymove.go), whose steps each hold it
// or let it go on; what the hub reads of one cluster's MemberDatabase is a share (share.go).
//
// One reconciler owns the whole DatabaseCluster status, so its conditions never race: each phase
// is a small function over a shared scope, each condition has one setter (status.go, after Cluster
// API's cluster_controller_status.go), and status is written once, only when it changed. Metrics
// and Events are recorded here, for what the reconcile adopted, never by scheduling.
package databasecluster
