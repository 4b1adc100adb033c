// Package agent wires the member agent: the MemberDatabase reconciler (package member, written
// once on multicluster-runtime for Pull and Push clusters), the heartbeat (package heartbeat) and
// the fence guard they share (package fence). cmd/agent and the scale benchmark both use Setup,
// so the benchmark's agents are wired exactly as users run them.
package agent
