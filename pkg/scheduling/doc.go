// Package scheduling binds one DatabaseCluster to the policy that selects it and to a placement:
// it runs the placement engine (pkg/placement) over the MemberClusters, decides whether the new
// decision replaces the one in force, and records which shares leave which clusters and how they
// are purged. It is pure: it reads no API server, records no metrics and raises no Events. The
// hub's databasecluster controller calls it on every reconcile and `hub plan` calls it offline;
// only the controller, once it adopts an outcome, counts and reports it.
package scheduling
