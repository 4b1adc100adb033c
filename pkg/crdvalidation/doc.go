// Package crdvalidation admits dbfleet objects offline the way the hub's API server does: with the
// generated CRDs the binary carries (deploy/crds), their OpenAPI schemas, defaults and CEL rules,
// evaluated by k8s.io/apiextensions-apiserver's own code rather than a copy of the rules, so an
// offline check (hub plan) and admission cannot drift apart.
//
// For a create it runs what the custom resource handler and its strategy run: prune unknown
// fields (reported as errors, as with kubectl's strict field validation), coerce and validate
// metadata (name and namespace as DNS names), apply schema defaults, validate the OpenAPI schema,
// embedded objects and list types, then the CEL rules within the API server's cost budget, skipped
// as there when a blocking error was found. Unlike a create, which drops it, status is validated
// too: a status the API server would refuse on a status update is an error.
package crdvalidation
