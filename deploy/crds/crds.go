// Package crds carries the generated CustomResourceDefinitions of this directory in the binary, so
// that tools which check objects offline (hub plan) use exactly the schemas the API server serves.
// The YAML files are written by `make manifests`; this file is not generated.
package crds

import "embed"

// Files holds every dbfleet.io_<plural>.yaml of this directory.
//
//go:embed dbfleet.io_*.yaml
var Files embed.FS
