// Package liveness is the hub's memory of agent lease renewals, measured on the hub's own
// monotonic clock. The clusterhealth controller feeds it from its Lease watch; before the hub acts
// on a silence (marks a cluster Ready=Unknown, promotes away from it) the silence is confirmed
// with a read of the Lease from the API server, so a watch that fell behind is never taken for an
// agent that stopped renewing.
package liveness
