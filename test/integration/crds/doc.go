// Package crds checks the generated CRDs against a real kube-apiserver: the samples a user would
// copy are accepted, bad objects are rejected at admission with messages that name the field, and
// names, printer columns, defaults and immutability are as docs/api.md says.
package crds
