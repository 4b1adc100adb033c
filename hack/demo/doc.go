// Command demo is `make demo`: it brings up the local federation (hack/localfed), places a
// database across the members, cuts the primary's member off by stopping its agent, narrates the
// failover as it happens with a live table, brings the member back, and leaves the federation
// running until Ctrl-C (DEMO_EXIT=1: tears it down and exits when done).
package main
