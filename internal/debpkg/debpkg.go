// Package debpkg installs Debian packages with apt-get, the one way dbfleet's local tools
// (localfed's real nodes, the image builder) set up what a fresh machine lacks.
package debpkg

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Install runs apt-get update, then installs pkgs (no recommends, non-interactive), apt-get's
// output going to this program's. The caller checks there is an apt-get and it runs as root, and
// says what else the user can do.
func Install(ctx context.Context, pkgs ...string) error {
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}
