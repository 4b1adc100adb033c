// Package push lets the hub drive member clusters in Push mode itself: multicluster-runtime's
// kubeconfig provider engages every cluster whose kubeconfig Secret (written by
// `hub join --sync-mode Push`; its name, label and key are defined here, by their reader) sits
// in the hub's namespace, and the same member reconciler the agent runs applies those clusters'
// MemberDatabases. Pull clusters are not engaged here, so their MemberDatabases are left to their
// agents. Prober probes an engaged cluster's API server for the health controller, which has no
// agent Lease to go by.
package push
