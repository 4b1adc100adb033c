// Package contact judges, from the replication protocol alone and on this process's monotonic
// clock, when a primary last heard from each of its standbys (Hearing) and when a standby last
// exchanged anything with a primary (Silence). These two readings are what lets a primary keep
// taking writes while the control plane is unreachable (failsafe) and what a standby must show
// before it may promote in a failover: docs/failover.md, "Failsafe and promotion from silence",
// has the argument that the two never let two instances take writes.
package contact
