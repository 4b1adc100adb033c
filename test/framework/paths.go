package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// RepoRoot is the root of the dbfleet checkout, found from this source file so that tests work
// from any package directory.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("framework: cannot locate source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// CRDDir holds the generated CRDs.
func CRDDir() string { return filepath.Join(RepoRoot(), "deploy", "crds") }

// SamplesDir holds one sample object per kind.
func SamplesDir() string { return filepath.Join(RepoRoot(), "deploy", "samples") }

// BinDir returns the directory holding kube-apiserver and etcd: $KUBEBUILDER_ASSETS when set,
// else bin/k8s of the checkout. It fails with a hint when the binaries are missing.
func BinDir() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "bin", "k8s")
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("%s not found in %s (run `make k8s-bins`, or set KUBEBUILDER_ASSETS): %w", name, dir, err)
		}
	}
	return dir, nil
}
