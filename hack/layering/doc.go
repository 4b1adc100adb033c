// Command layering fails when an import runs back up the house: when a package depends, directly
// or through others, on one it must not (the instance manager on the agent or the hub, the agent
// on the hub, the placement core on a Kubernetes client, the agent binary on the instance manager,
// the wire contract on anything but the standard library). `make lint` runs it.
//
//	go run ./hack/layering
package main
