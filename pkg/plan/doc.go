// Package plan is `hub plan`: it reads DatabaseClusters, (Cluster)PropagationPolicies and
// MemberClusters from YAML files or a live hub, runs exactly the policy matching and placement
// the hub runs, and prints where every DatabaseCluster would go and why other clusters would not
// be chosen. Nothing is written anywhere.
package plan
