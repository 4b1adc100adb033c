// Package push lets the hub drive member clusters in Push mode itself: multicluster-runtime's
// kubeconfig provider engages every cluster whose kubeconfig Secret (written by
// `hub join --sync-mode Push`) sits in dbfleet-system, and the same member reconciler the agent
// runs applies those clusters' MemberDatabases. Pull clusters are not engaged here, so their
// MemberDatabases are left to their agents.
package push
