// Package member simulates the member side of a dbfleet agent for the scale benchmark: an
// in-memory store standing in for a member cluster's API server, whose StatefulSets report all
// replicas Ready a configurable delay after each change, as a kubelet and the StatefulSet
// controller would. The agent's own reconciler, heartbeat and fencing code run against it
// unchanged; only the member API server is simulated.
package member
