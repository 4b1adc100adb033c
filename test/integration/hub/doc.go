// Package hub tests the hub's control loop against a real kube-apiserver: policy matching,
// scheduling, propagation into member namespaces, status aggregation from what agents report
// (written here as an agent would), deletion, and restarts.
package hub
