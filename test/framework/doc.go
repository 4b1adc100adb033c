// Package framework starts real Kubernetes API servers for integration tests: a hub with the
// dbfleet CRDs installed, and plain API servers standing in for member clusters. It runs the
// binaries that `make k8s-bins` builds (or those in $KUBEBUILDER_ASSETS) through envtest, and
// offers the create-and-wait helpers the suites share. internal/process is the harness that
// starts, waits for and stops every other process of the tests and of hack/localfed, and reserves
// their ports.
package framework
