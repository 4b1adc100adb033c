// Package contract is what the hub, the agent and the instance manager say to one another through
// a database's pods, its member-local primary Lease and the instance's HTTP port, written once and
// read by all three:
//   - the primary Lease: its name, its holder "<cluster>/<epoch>", and the clock allowances both
//     the agent (which renews it) and the instance (which fences on it) count with (lease.go);
//   - the labels and annotations the agent puts on a database's pods and the instance manager
//     reads, with the format and parse of each value (pod.go);
//   - pod names "<db>-<ordinal>" (pod.go);
//   - the environment the agent gives the instance manager's container, and the keys of the
//     credential Secrets mounted into it (env.go);
//   - WAL locations (lsn.go);
//   - the instance manager's /status body, its paths and port (status.go).
//
// The names the hub and the agent share through API objects (MemberDatabase, the agent's hub
// Lease, finalizers, taints) are in api/v1alpha1. This package imports only the standard library,
// so that importing it never brings one side's code into another's binary.
package contract
