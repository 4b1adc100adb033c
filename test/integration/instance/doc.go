// Package instance tests dbfleet-instance as users meet it: the built binary, run as processes
// standing in for pods, managing real PostgreSQL servers, reading Pods and Leases from a real
// API server through a user that may only get them. The test plays the agent: it writes the
// pods' role labels and annotations and renews the primary Leases.
package instance
