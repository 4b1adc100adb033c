// Package decide is the instance manager's judgement, pure and without I/O: whether the primary
// Lease lets this instance write now (JudgeLease), and what postgres should be doing given the
// pod's role and epoch, the Lease and the local data directory (Decide). The manager carries the
// decisions out; keeping them here lets every rule of the fencing contract be table-tested.
package decide
