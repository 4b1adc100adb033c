package postgres

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
)

// DebianBinGlob is where Debian and the official postgres images keep the server binaries.
const DebianBinGlob = "/usr/lib/postgresql/*/bin"

// FindBinDir returns dir if set, else the directory of postgres on PATH, else the highest
// major version's /usr/lib/postgresql/<major>/bin.
func FindBinDir(dir string) (string, error) {
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err != nil {
			return "", fmt.Errorf("postgres binaries directory %s: %w", dir, err)
		}
		return dir, nil
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob(DebianBinGlob)
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no postgres binary on PATH or in %s", DebianBinGlob)
}

func major(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Binaries runs the server's programs as User.
type Binaries struct {
	Dir string
	// User is who the programs run as; nil runs them as the manager's own user.
	User *syscall.Credential
}

func (b Binaries) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(b.Dir, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.User}
	return cmd
}
