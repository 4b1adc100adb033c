// Package credentials is the hub controller that gives every postgres DatabaseCluster its
// credentials: the Secrets <db>-superuser, <db>-replication and <db>-app in the DatabaseCluster's
// namespace, created with random passwords unless the user brought their own, and copies of them
// in every member-<cluster> namespace that holds a share of the database, where the cluster's
// agent reads them.
package credentials
