// Package queue builds the queue of every dbfleet controller: controller-runtime's priority queue
// (what its controllers use by default), shut down only once no worker waits in it for an item.
//
// controller-runtime v0.23.3's priority queue can deadlock on shutdown: a worker waiting for an
// item leaves through the closed done channel while the queue's dispatcher, woken at the same
// moment, already holds the queue's locks and blocks for ever handing an item to it. The next
// worker to mark an item Done, or to ask for one, waits for those locks, its controller waits for
// the worker, and the manager gives up after its grace period ("failed waiting for all runnables
// to end within grace period"): seen in the agent's integration tests in CI, with the goroutines
// stuck exactly there. Upstream fixed it after v0.23.3 (kubernetes-sigs/controller-runtime#3538,
// #3540); multicluster-runtime v0.23.1 needs controller-runtime v0.23.x and the module proxy
// serves no later v0.23 release. Remove this package when controller-runtime carries the fix.
package queue
