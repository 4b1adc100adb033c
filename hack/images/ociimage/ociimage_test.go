package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNormalizeName(t *testing.T) {
	for in, want := range map[string]string{
		"postgres:15":               "docker.io/library/postgres:15",
		"dbfleet/agent:dev":         "docker.io/dbfleet/agent:dev",
		"ghcr.io/dbfleet/hub:dev":   "ghcr.io/dbfleet/hub:dev",
		"localhost/pause:1":         "localhost/pause:1",
		"localhost:5000/x/y:latest": "localhost:5000/x/y:latest",
	} {
		if got, err := NormalizeName(in); err != nil || got != want {
			t.Errorf("NormalizeName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "postgres", "ghcr.io:443/x", "postgres@sha256:00", "a b:1"} {
		if got, err := NormalizeName(bad); err == nil {
			t.Errorf("NormalizeName(%q) = %q, want an error", bad, got)
		}
	}
}

// readTar returns the regular files of a tar stream by name, and the headers of all entries.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files, headers := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, headers
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("read %s: %v", h.Name, err)
			}
			files[h.Name] = b
		}
	}
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

// blob is the archive's blob of d, checked against d's digest and size.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	name := "blobs/" + strings.Replace(d.Digest, ":", "/", 1)
	b, ok := files[name]
	if !ok {
		t.Fatalf("archive has no %s (%s)", name, d.MediaType)
	}
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != d.Digest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: %d bytes with digest sha256:%x, the descriptor says %d bytes", d.Digest, len(b), sum, d.Size)
	}
	return b
}

// buildArchive writes a small image with a file, a host file, a symlink and a directory.
func buildArchive(t *testing.T, dir, ref string) string {
	t.Helper()
	host := filepath.Join(dir, "host-file")
	if err := os.WriteFile(host, []byte("from the host\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	l := NewLayer()
	l.Add(Entry{Path: "/etc/hello", Data: []byte("hello\n")})
	l.Add(Entry{Path: "/usr/bin/tool", Src: host})
	l.Add(Entry{Path: "/bin", Link: "usr/bin"})
	l.Add(Entry{Path: "/var/lib/data", Dir: true, Mode: 0o700, UID: 999, GID: 999})
	img, err := Image(l, Config{Entrypoint: []string{"/usr/bin/tool"}, Env: []string{"A=b"}, User: "999"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "image.tar")
	if err := WriteArchive(file, ref, img); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestWriteArchiveLayout checks what containerd's `ctr images import` reads of an OCI archive:
// oci-layout, an index.json whose manifest carries io.containerd.image.name (the full name the
// CRI looks the image up by), and the manifest's config and layer blobs with their digests.
func TestWriteArchiveLayout(t *testing.T) {
	dir := t.TempDir()
	f, err := os.Open(buildArchive(t, dir, "postgres:15"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files, _ := readTar(t, f)

	var ociLayout struct {
		Version string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal(files["oci-layout"], &ociLayout); err != nil || ociLayout.Version != "1.0.0" {
		t.Fatalf("oci-layout %q: %v", files["oci-layout"], err)
	}
	var index struct {
		MediaType string       `json:"mediaType"`
		Manifests []descriptor `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1: %s", len(index.Manifests), files["index.json"])
	}
	md := index.Manifests[0]
	if md.MediaType != "application/vnd.oci.image.manifest.v1+json" || md.Annotations[AnnotationImageName] != "docker.io/library/postgres:15" || md.Annotations[AnnotationRefName] != "15" {
		t.Fatalf("index.json manifest %+v, want an OCI manifest named docker.io/library/postgres:15, tag 15", md)
	}
	var manifest struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	if err := json.Unmarshal(blob(t, files, md), &manifest); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	var config struct {
		OS, Architecture string
		Config           struct {
			Entrypoint []string
			Env        []string
			User       string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(blob(t, files, manifest.Config), &config); err != nil {
		t.Fatalf("config: %v", err)
	}
	if manifest.Config.MediaType != "application/vnd.oci.image.config.v1+json" || config.OS != "linux" || config.Architecture == "" ||
		strings.Join(config.Config.Entrypoint, " ") != "/usr/bin/tool" || strings.Join(config.Config.Env, " ") != "A=b" || config.Config.User != "999" {
		t.Fatalf("config %s %+v", manifest.Config.MediaType, config)
	}
	if len(manifest.Layers) != 1 || manifest.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" || len(config.RootFS.DiffIDs) != 1 {
		t.Fatalf("layers %+v, diff ids %v: want one gzip OCI layer", manifest.Layers, config.RootFS.DiffIDs)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, manifest.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); "sha256:"+hex.EncodeToString(sum[:]) != config.RootFS.DiffIDs[0] {
		t.Fatalf("layer's uncompressed digest sha256:%x, config's diff id %s", sum, config.RootFS.DiffIDs[0])
	}
	lf, lh := readTar(t, bytes.NewReader(raw))
	if string(lf["etc/hello"]) != "hello\n" || string(lf["usr/bin/tool"]) != "from the host\n" || lh["usr/bin/tool"].Mode != 0o750 {
		t.Errorf("layer files %v", lh)
	}
	if h := lh["bin"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/bin" {
		t.Errorf("layer /bin %+v, want a symlink to usr/bin", h)
	}
	if h := lh["var/lib/data/"]; h == nil || h.Typeflag != tar.TypeDir || h.Mode != 0o700 || h.Uid != 999 {
		t.Errorf("layer /var/lib/data %+v, want a directory 0700 of uid 999", h)
	}
	for _, parent := range []string{"etc/", "usr/", "usr/bin/", "var/", "var/lib/"} {
		if h := lh[parent]; h == nil || h.Typeflag != tar.TypeDir {
			t.Errorf("layer has no parent directory %s", parent)
		}
	}
}

// TestAddHostPathFollowsSymlinks: a host path through symlinks (a usr-merged /lib, a soname
// link) arrives as the same symlinks plus the file they end at.
func TestAddHostPathFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "usr", "lib")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(real, "libx.so.1.2"), []byte("elf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("libx.so.1.2", filepath.Join(real, "libx.so.1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/lib", filepath.Join(dir, "lib")); err != nil {
		t.Fatal(err)
	}
	l := NewLayer()
	if err := l.AddHostPath(filepath.Join(dir, "lib", "libx.so.1")); err != nil {
		t.Fatal(err)
	}
	if e := l.entries[filepath.Join(dir, "lib")]; e.Link != "usr/lib" {
		t.Errorf("lib entry %+v, want a symlink to usr/lib", e)
	}
	if e := l.entries[filepath.Join(real, "libx.so.1")]; e.Link != "libx.so.1.2" {
		t.Errorf("libx.so.1 entry %+v, want a symlink to libx.so.1.2", e)
	}
	if e := l.entries[filepath.Join(real, "libx.so.1.2")]; e.Src != filepath.Join(real, "libx.so.1.2") {
		t.Errorf("libx.so.1.2 entry %+v, want the host file", e)
	}
}

// TestCtrImportsArchive imports an archive into a containerd of its own with `ctr images
// import`, where containerd is installed and the test runs as root; elsewhere it is skipped.
func TestCtrImportsArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts containerd")
	}
	containerd, err1 := exec.LookPath("containerd")
	ctr, err2 := exec.LookPath("ctr")
	if err1 != nil || err2 != nil || os.Geteuid() != 0 {
		t.Skip("needs root and containerd, ctr (Debian package containerd)")
	}
	dir, err := os.MkdirTemp("", "ociimage-ctr-") // short: the socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	archive := buildArchive(t, dir, "ghcr.io/dbfleet/test:import")
	sock := filepath.Join(dir, "c.sock")
	cfg := filepath.Join(dir, "config.toml")
	// Only the content and image services are needed: no CRI, no snapshotter beyond native.
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = %q\n[ttrpc]\n  address = %q\n",
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cmd := exec.Command(containerd, "--config", cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ctrRun := func(args ...string) (string, error) {
		out, err := exec.Command(ctr, append([]string{"--address", sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
		return string(out), err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := ctrRun("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not serve %s in 30s:\n%s", sock, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := ctrRun("images", "import", "--snapshotter", "native", archive); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
	out, err := ctrRun("images", "list", "-q")
	if err != nil {
		t.Fatalf("ctr images list: %v\n%s", err, out)
	}
	if !strings.Contains(out, "ghcr.io/dbfleet/test:import") {
		t.Fatalf("after the import containerd lists %q, want ghcr.io/dbfleet/test:import", out)
	}
}

func TestLookupFollowsLayerSymlinks(t *testing.T) {
	l := NewLayer()
	l.Add(Entry{Path: "/lib", Link: "usr/lib"})
	l.Add(Entry{Path: "/usr/lib/libx.so.1", Link: "libx.so.1.2"})
	l.Add(Entry{Path: "/usr/lib/libx.so.1.2", Data: []byte("elf")})
	if e, ok := l.Lookup("/lib/libx.so.1"); !ok || e.Path != "/usr/lib/libx.so.1.2" {
		t.Errorf("Lookup(/lib/libx.so.1) = %+v, %v; want /usr/lib/libx.so.1.2", e, ok)
	}
	if _, ok := l.Lookup("/lib/liby.so"); ok {
		t.Error("Lookup(/lib/liby.so) found an entry the layer does not have")
	}
}
