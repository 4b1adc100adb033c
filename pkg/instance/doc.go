// Package instance is dbfleet-instance, the manager that runs as PID 1 of a database pod's
// postgres container: it bootstraps or clones the data directory, runs postgres as its child
// (primary or standby, as the pod's role, the primary Lease and the data directory allow, see
// package decide), fences the primary before its Lease runs out, keeps the replication slots of
// the standbys, and serves /healthz, /readyz and /status.
//
// Its parts: options.go (flags with environment fallbacks, the mounted Secrets), manager.go
// (the loop that observes, decides and acts), actions.go (bootstrap, clone, standby, rejoin with
// pg_rewind, promote, primary and its synchronous_standby_names, fence), guard.go (the fence timer), server.go (HTTP and the status it reports).
package instance
