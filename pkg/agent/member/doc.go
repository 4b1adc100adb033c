// Package member is the member-side reconciler: it turns a MemberDatabase on the hub into a
// StatefulSet, a headless Service and PodDisruptionBudgets in one member cluster, labels each pod
// with its role, and reports the share's status back to the MemberDatabase. It reads and writes;
// the objects it writes are built by pkg/specs, which does neither.
//
// It is written once on multicluster-runtime: MemberDatabases are watched in the manager's local
// cluster (the hub) and each is reconciled into the engaged cluster its dbfleet.io/cluster label
// names. The agent engages its own member cluster (Pull); the hub engages Push members through
// kubeconfig Secrets. MemberDatabases of clusters that are not engaged are left alone.
//
// Its parts: reconciler.go (Reconcile and the full pass), fencing.go (where the share's primary
// stands: the agent's hub lease, a lapse), primarylease.go (the member-local primary Lease: the
// renewal-only pass, when to renew, when it has certainly lapsed, and what it and the renewer
// share), renewer.go (each hub renewal carried into the live primaries' Leases at once, apart from
// the passes), sharestate.go (what the agent remembers of a share between passes), apply.go, status.go, instances.go (the instances'
// /status), endpoints.go, storage.go, cleanup.go.
//
// It only ever touches objects carrying its managed-by label: anything else with the same name is
// reported as a conflict, never adopted, changed or deleted.
package member
