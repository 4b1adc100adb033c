// Package instance is dbfleet-instance, the manager that runs as PID 1 of a database pod's
// postgres container: it bootstraps or clones the data directory, runs postgres as its child
// (primary or standby, as the pod's role, the primary Lease and the data directory allow, see
// package decide), fences the primary before its Lease runs out, keeps the replication slots of
// the standbys, and serves /healthz, /readyz and /status.
//
// Its parts: options.go (flags with environment fallbacks, the mounted Secrets), manager.go
// (the loop that observes, decides and acts), and one file per kind of action: bootstrap.go
// (initdb, or a clone of the primary with pg_basebackup), standby.go, rejoin.go (pg_rewind, or
// the data kept aside), primary.go (promote, replication slots, synchronous_standby_names),
// fence.go, postgres.go (starting postgres, its configuration, a connection to it);
// credentials.go (the mounted Secrets followed), guard.go (the fence timer), server.go (HTTP and
// the status it reports).
package instance
