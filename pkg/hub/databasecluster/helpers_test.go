package databasecluster

import "github.com/dbfleet/dbfleet/pkg/scheduling/schedulingtest"

// The shared builders, under the short names these tests use.
var (
	t0               = schedulingtest.T0
	fleet            = schedulingtest.Fleet
	unreachableSince = schedulingtest.UnreachableSince
	staticPolicy     = schedulingtest.StaticPolicy
	newDB            = schedulingtest.NewDB
)
