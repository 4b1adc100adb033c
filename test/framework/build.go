package framework

import (
	"fmt"
	"os/exec"
	"strings"
)

// Build compiles the given main packages of this module (e.g. "./cmd/hub") into dir, so suites
// run the very binaries users run, built from the checkout under test.
func Build(dir string, pkgs ...string) error {
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
}
