// Package scale is the scale benchmark of dbfleet (make bench-scale): a real etcd and hub API
// server, the real `hub run` binary, and many member clusters whose hub side is real (each joined
// with `hub join`'s library, with its own credentials, Lease, member-NAME watch and status writes
// through the agent's own code) and whose member API server is simulated in memory
// (test/scale/member). It measures joining, placement throughput and latency, resource use, API
// request rates, steady state, failover and hub restart, and reports them as JSON and Markdown.
package scale
