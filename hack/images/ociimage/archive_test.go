package ociimage

import (
	"archive/tar"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestReadArchivePushPull: an archive WriteArchive wrote reads back as the same image (digest,
// name), Push puts it into a registry (go-containerregistry's, in process) under the digest it
// returns, and what a pull gets has the image's labels and user.
func TestReadArchivePushPull(t *testing.T) {
	dir := t.TempDir()
	l := NewLayer()
	l.Add(Entry{Path: "/hello", Data: []byte("hello\n"), Mode: 0o755})
	img, err := Image(l, Config{Entrypoint: []string{"/hello"}, User: "65532:65532", Labels: map[string]string{"org.opencontainers.image.version": "v9"}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "hello.tar")
	if err := WriteArchive(file, "ghcr.io/dbfleet/hello:dev", img); err != nil {
		t.Fatal(err)
	}
	read, refName, err := ReadArchive(file, filepath.Join(dir, "unpacked"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := read.Digest(); got != want || refName != "ghcr.io/dbfleet/hello:dev" {
		t.Fatalf("ReadArchive: digest %s name %q, want %s and ghcr.io/dbfleet/hello:dev", got, refName, want)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/dbfleet/hello:v9"
	pushed, err := Push(context.Background(), read, ref, false)
	if err != nil {
		t.Fatal(err)
	}
	if pushed != want {
		t.Errorf("Push returned %s, want %s", pushed, want)
	}
	parsed, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(parsed)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := pulled.Digest(); got != want {
		t.Errorf("the registry serves %s as %s, want %s", ref, got, want)
	}
	cf, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || cf.Config.Labels["org.opencontainers.image.version"] != "v9" {
		t.Errorf("pulled config: user %q labels %v", cf.Config.User, cf.Config.Labels)
	}
	if _, err := Push(context.Background(), read, "not a reference", false); err == nil {
		t.Error("Push to a bad reference succeeded")
	}
}

// TestReadArchiveRefusesPathsOutside: an archive entry naming ../x is refused, not written
// outside the directory.
func TestReadArchiveRefusesPathsOutside(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "evil.tar")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	if err := tw.WriteHeader(&tar.Header{Name: "../escaped", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, _, err := ReadArchive(file, filepath.Join(dir, "out")); err == nil || !strings.Contains(err.Error(), "leaves the archive") {
		t.Errorf("ReadArchive of ../escaped: %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "escaped")); err == nil {
		t.Error("the entry was written outside the directory")
	}
}
