// Package policy binds a DatabaseCluster to the one (Cluster)PropagationPolicy that wins. It is
// pure (no client), so the hub and `hub plan` match exactly alike.
//
// Order, as docs/api.md documents it: the highest priority wins; then the more precise selector (a name match
// beats a label match, which beats a selector that selects everything); then a PropagationPolicy
// beats a ClusterPropagationPolicy; then the policy name that sorts first.
package policy
