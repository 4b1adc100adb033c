// Package agent is the home of the member agent: the MemberDatabase reconciler (written once on
// multicluster-runtime, for Pull and Push clusters), the heartbeat and the fencing loop. None has
// landed yet: this build ships the API and its tests.
package agent
