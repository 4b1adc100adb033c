// Command demo is `make demo`: it brings up the local federation (hack/localfed), places a
// database across the members, writes rows, stops the primary's agent to show that writes go on
// without it, partitions the primary's member (localfed partition) and narrates the failover as it
// happens with a live table, heals it, and leaves the federation running until Ctrl-C
// (DEMO_EXIT=1: tears it down and exits when done).
package main
