// Package e2e runs dbfleet end to end on a real local federation: the suite builds bin/hub,
// bin/agent and bin/localfed from the checkout into a temporary directory, brings up one
// federation of three members (east, west, central) with `localfed up --dir <tmp>` — real
// kube-apiservers, controller managers, schedulers and kwok Nodes, so StatefulSets get Pods that
// become Ready — and tears it down by its pid files with `localfed down` when the suite ends.
//
// Every agent reaches the hub through a proxy of the suite's own (the agent's hub kubeconfig is
// pointed at it and the agent restarted with `localfed stop/start`), so a test can cut one agent
// off the hub while it keeps running. Timings are shortened by flags: heartbeat 1 s, fenceAfter
// 4 s, cluster grace period 5 s, and the tests' policies tolerate dbfleet.io/unreachable for 5 s.
//
// What it covers: placement across the members with Pods Ready in each; scaling up and down; a
// policy change that migrates replicas while the Ready count never drops below the replicas of
// the clusters that keep their share; deletion leaving nothing in any member; failover when a
// member's agent stops, within grace + toleration + a 30 s margin at epoch + 1, and the cleanup
// of the member when it returns; a partitioned primary that fences before the hub promotes, with
// watches checking, at every change, that no two unfenced primaries hold unexpired primary Leases; a hub
// restart in the middle of a failover; and the propagation latency of 20 DatabaseClusters. Each
// test logs what it measured (run with -v to see it).
//
// It needs the Kubernetes binaries of `make k8s-bins` (bin/k8s, or $KUBEBUILDER_ASSETS), takes
// about 2 GB of memory and a few minutes, and is skipped by `go test -short`. Run it alone with
//
//	go test -count=1 -v -timeout 30m ./test/e2e
//	go test -count=1 -v ./test/e2e -run TestPartitionedPrimary
//
// When a test fails, the logs of every process are copied to a temporary directory whose name
// the suite prints.
package e2e
