// Package predicates holds the watch filters the hub's and the agent's controllers share.
package predicates
