// Package hub is the home of the hub's controllers, one sub-package per controller (policy
// matching and scheduling, propagation, status aggregation, cluster health). None has landed yet:
// this build ships the API and its tests.
package hub
