// Package options holds the command-line options that the hub and the agent share: the
// kubeconfig, the metrics and health probe addresses and the zap logging flags, with the
// validation that rejects bad values at start-up.
package options
