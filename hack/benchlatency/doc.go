// Command benchlatency measures how long one database takes from apply to running on a local
// federation with fake nodes (make bench-latency): it brings up `localfed up --nodes kwok` in a
// state directory of its own, creates DatabaseClusters one at a time and then in a burst, and
// prints, for each pass, p50, p99 and max of apply → every StatefulSet created in each member,
// apply → every Pod Ready, apply → the hub reporting Available, and every Pod Ready → Available.
// kwok reports a scheduled Pod Ready at once, so what is measured is the control planes' path:
// the hub placing and propagating, the agents applying and reporting, the member's StatefulSet
// controller and scheduler. It tears the federation down with `localfed down`, which checks
// that nothing is left. See docs/performance.md.
package main
