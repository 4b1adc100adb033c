// Package agent tests the member-side reconciler against two real API servers: a hub with the
// dbfleet CRDs and a plain member. MemberDatabases are written here as the hub would; StatefulSet
// status is written here as the member's controller manager would.
package agent
