// Package resourcesummary adds up a member cluster's capacity (MemberCluster
// status.resourceSummary, Karmada's shape) from its Nodes and Pods: the agent reports it for a
// Pull cluster, the hub's health controller for a Push cluster.
package resourcesummary
