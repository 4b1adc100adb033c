// Package e2e runs dbfleet end to end on a real local federation. The suite builds hub, agent and
// localfed from the checkout into a temporary directory, brings up one federation of three
// members (east, west, central) with `localfed up --dir <tmp>` — real kube-apiservers,
// controller managers, schedulers and a real node each (kubelet, containerd, runc), so every
// database is a real PostgreSQL whose Pods become Ready when its instances say so —
// and tears it down by its pid files with `localfed down` when the suite ends (also on an
// interrupt, or just before `go test` would kill it at its -timeout).
//
// Every agent reaches the hub through a proxy of the suite's own (its hub kubeconfig is pointed
// at the proxy and the agent restarted with `localfed stop` and `start`), so a test can cut one
// agent off the hub while it keeps running. Faults are driven through localfed, by pid file.
// Timings are shortened by flags: heartbeat 1 s, fenceAfter 8 s, cluster grace period 8 s; the
// tests' policies tolerate dbfleet.io/unreachable for 5 s.
//
// The tests, each logging what it measured (run with -v):
//
//   - TestPlacementAcrossMembers: one share per member, its Pod Ready, one primary with its Lease.
//   - TestScaleUpAndDown: spec.replicas 3 → 6 → 2; the members' StatefulSets and Pods follow.
//   - TestPolicyChangeKeepsReadyReplicas: a policy change moves a share; in every state the
//     watches see, the Ready count stays at or above the replicas of the clusters that keep
//     their share (the minimum docs/hub.md documents).
//   - TestDeleteLeavesNothingBehind: no StatefulSet, Service, budget, primary Lease, Pod, claim
//     or MemberDatabase is left.
//   - TestMemberLoss: the primary member's agent stops; the primary moves at epoch + 1 within
//     grace + toleration + a 30 s margin; the member, back, is cleaned up.
//   - TestPartitionedPrimary: the primary member's agent is cut off; it fences before the hub
//     promotes, and no state ever has two unfenced primaries holding unexpired primary Leases.
//   - TestHubRestartMidFailover: the hub restarts while a failover waits out its toleration.
//   - TestRowsCrossClusters: rows written through status.endpoints.readWrite with the app
//     credentials are read on the standbys of the other two members; of the three instances,
//     only the primary accepts a direct write.
//   - TestPropagationLatency: create → StatefulSets → Pods Ready → Available, p50 and max, for a
//     3 DatabaseClusters one at a time (docs/performance.md).
//
// Two benchmarks skip unless DBFLEET_E2E_BENCH=1 (`make bench-replication` sets it), so the suite
// does not grow slower; they log FIGURE lines for docs/performance.md:
//
//   - TestReplicationLagUnderPgbench: pgbench against readWrite, asynchronously and with
//     synchronous ANY 1 required; the primary's pg_stat_replication sampled every 500 ms gives the
//     standbys' lag in bytes and time; every standby must replay up to the primary afterwards.
//   - TestTenDatabasesFailingOver: ten databases with their primaries in one member, a writer
//     each, that member's agent frozen: every one must fail over at epoch + 1 with no acknowledged
//     row lost and rejoin; the write gaps and the machine's load are logged.
//
// It needs the Kubernetes binaries of `make k8s-bins` (bin/k8s, or $KUBEBUILDER_ASSETS), about
// 2 GB of memory and 3 to 5 minutes, and is skipped by `go test -short`. Run it alone with
//
//	go test -count=1 -v ./test/e2e
//	go test -count=1 -v ./test/e2e -run TestPartitionedPrimary
//
// When a test fails, the logs of every process are copied to a temporary directory whose name
// the suite prints.
package e2e
