package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestCopySelf(t *testing.T) {
	dir := t.TempDir()
	if err := copySelf(dir); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "dbfleet-instance")
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("the copy differs from the executable")
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm()&0o111 != 0o111 {
		t.Errorf("the copy is not executable by all: %v %v", fi.Mode(), err)
	}
}
