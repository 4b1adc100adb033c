package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// copyFlag makes dbfleet-instance copy its own executable into a directory and exit: the init
// container of a database pod runs it from the agent's image to put the manager into the shared
// emptyDir the postgres container runs it from (CloudNativePG's bootstrap-controller pattern;
// the agent's image has no shell or cp).
const copyFlag = "--copy-to="

// copySelf copies the running executable to dir/dbfleet-instance, executable by all.
func copySelf(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("open %s: %w", self, err)
	}
	defer func() { _ = src.Close() }()
	dst := filepath.Join(dir, "dbfleet-instance")
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := io.Copy(out, src); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy to %s: %w", tmp, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return nil
}
