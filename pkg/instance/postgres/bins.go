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

// Programs are the server programs the instance manager runs; a binaries directory must hold
// them all.
var Programs = []string{"postgres", "initdb", "pg_ctl", "pg_basebackup", "pg_controldata", "pg_rewind"}

// FindBinDir returns dir if set, else the directory of postgres on PATH (following a symlink, as
// /usr/local/bin/postgres -> /usr/lib/postgresql/15/bin/postgres), else the highest major
// version's /usr/lib/postgresql/<major>/bin; the directory must hold every one of Programs.
func FindBinDir(dir string) (string, error) {
	if dir != "" {
		return dir, hasPrograms(dir)
	}
	var candidates []string
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	dirs, _ := filepath.Glob(DebianBinGlob)
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	candidates = append(candidates, dirs...)
	for _, d := range candidates {
		if hasPrograms(d) == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("no directory with %v on PATH or in %s", Programs, DebianBinGlob)
}

func hasPrograms(dir string) error {
	for _, p := range Programs {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("postgres binaries directory %s: %w", dir, err)
		}
	}
	return nil
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
	// Scratch is a private directory for the password file a client program reads
	// (withPassword); the data volume's root, in a pod.
	Scratch string
}

func (b Binaries) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(b.Dir, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: b.User}
	return cmd
}
