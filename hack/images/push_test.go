package main

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/dbfleet/dbfleet/hack/images/ociimage"
	"github.com/dbfleet/dbfleet/pkg/images"
)

// TestPushedHubAndAgentImages builds the hub and agent images as `make images` does, pushes them
// as `make push` does to go-containerregistry's registry (in process, over HTTP), pulls them back
// and checks what a cluster would run: the digest push reported, the OCI labels of the build, the
// numeric non-root user, the entrypoint, static executables. For the agent image it also runs
// what the agent's database pods run of it: the init container, as the image's user, copies
// /dbfleet-instance into an emptyDir (0777, as the kubelet makes one), and the postgres container,
// as uid 999, executes the copy.
func TestPushedHubAndAgentImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the hub, agent and dbfleet-instance binaries")
	}
	out := t.TempDir()
	meta := buildMeta{version: "v1.2.3-test", revision: "0123456789abcdef0123456789abcdef01234567", source: images.Source}
	if err := run(out, "agent,hub", meta); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/dbfleet"

	done, err := push(context.Background(), out, repo, "v1.2.3-test", []string{"hub", "agent"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2 {
		t.Fatalf("push pushed %d images, want 2: %+v", len(done), done)
	}
	want := map[string]struct {
		entrypoint string
		files      []string
	}{
		"hub":   {"/hub", []string{"hub"}},
		"agent": {"/agent", []string{"agent", "dbfleet-instance"}},
	}
	for _, p := range done {
		n := strings.TrimSuffix(filepath.Base(p.file), ".tar")
		checkPushedImage(t, p, repo, meta, want[n].entrypoint, want[n].files)
	}
}

// checkPushedImage pulls the image push reported as p and checks it against the archive it was
// pushed from, the build's labels, user and entrypoint, and that files are static executables
// every user may run.
func checkPushedImage(t *testing.T, p pushed, repo string, meta buildMeta, entrypoint string, files []string) {
	n := strings.TrimSuffix(filepath.Base(p.file), ".tar")
	if p.ref != repo+"/"+n+":v1.2.3-test" {
		t.Errorf("%s pushed as %s, want %s/%s:v1.2.3-test", n, p.ref, repo, n)
	}
	ref, err := name.ParseReference(p.ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("pull %s: %v", p.ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	local, _, err := ociimage.ReadArchive(p.file, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	localDigest, err := local.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if digest.String() != p.digest || digest != localDigest {
		t.Errorf("%s: the registry serves digest %s, push reported %s, the archive has %s", n, digest, p.digest, localDigest)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		images.LabelVersion:  "v1.2.3-test",
		images.LabelRevision: meta.revision,
		images.LabelSource:   images.Source,
	} {
		if got := cf.Config.Labels[k]; got != v {
			t.Errorf("%s: label %s = %q, want %q", n, k, got, v)
		}
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("%s: user %q, want the numeric non-root 65532:65532", n, cf.Config.User)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != entrypoint {
		t.Errorf("%s: entrypoint %v, want %s", n, cf.Config.Entrypoint, entrypoint)
	}
	if cf.OS != "linux" {
		t.Errorf("%s: os %q, want linux", n, cf.OS)
	}
	root := unpackImage(t, img)
	for _, f := range files {
		p := filepath.Join(root, f)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if fi.Mode().Perm()&0o005 != 0o005 {
			t.Errorf("%s: /%s has mode %v, want readable and executable by others", n, f, fi.Mode())
		}
		if interp := elfInterpreter(t, p); interp != "" {
			t.Errorf("%s: /%s is dynamically linked (interpreter %s), want a static binary", n, f, interp)
		}
	}
	if n == "agent" {
		t.Run("instance manager runs as postgres from the init container's copy", func(t *testing.T) {
			copyAndRunAsPostgres(t, filepath.Join(root, "dbfleet-instance"))
		})
	}
}

// unpackImage writes the regular files of img's layers into a directory readable by every user
// and returns it.
func unpackImage(t *testing.T, img v1.Image) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dbfleet-image-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "/") {
				continue // the top-level files are the binaries
			}
			f, err := os.OpenFile(filepath.Join(dir, h.Name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			// The file's mode as the layer has it, whatever the umask.
			if err := os.Chmod(f.Name(), fs.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		}
		rc.Close()
	}
	return dir
}

// elfInterpreter is the dynamic loader an executable asks for; empty for a static one.
func elfInterpreter(t *testing.T, file string) string {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatalf("%s is not an ELF executable: %v", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, _ := io.ReadAll(p.Open())
			return strings.TrimRight(string(b), "\x00")
		}
	}
	return ""
}

// copyAndRunAsPostgres runs bin --copy-to=<emptyDir> as the agent image's user (the init
// container), then the copy as uid 999 (the postgres container).
func copyAndRunAsPostgres(t *testing.T, bin string) {
	if os.Geteuid() != 0 {
		t.Skip("running as the image's user and as uid 999 needs root")
	}
	emptyDir, err := os.MkdirTemp("", "dbfleet-emptydir-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(emptyDir) })
	if err := os.Chmod(emptyDir, 0o777); err != nil {
		t.Fatal(err)
	}
	as := func(uid uint32, name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		cmd.Dir = "/"
		return cmd
	}
	if out, err := as(images.NonRootUID, bin, "--copy-to="+emptyDir).CombinedOutput(); err != nil {
		t.Fatalf("the init container's copy as uid %d: %v\n%s", images.NonRootUID, err, out)
	}
	copied := filepath.Join(emptyDir, "dbfleet-instance")
	fi, err := os.Stat(copied)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o005 != 0o005 {
		t.Errorf("the copy has mode %v, want readable and executable by others", fi.Mode())
	}
	out, err := as(999, copied, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("the copy run as uid 999 (postgres): %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "dbfleet-instance") {
		t.Errorf("the copy run as uid 999 printed %q, want the instance manager's usage", out)
	}
}

// TestElfInterpreterSeesADynamicExecutable: the static check above would pass anything if it
// could not see a dynamic loader; this machine's ls has one.
func TestElfInterpreterSeesADynamicExecutable(t *testing.T) {
	ls, err := exec.LookPath("ls")
	if err != nil {
		t.Skip("no ls")
	}
	if interp := elfInterpreter(t, ls); !strings.Contains(interp, "ld-") {
		t.Errorf("elfInterpreter(%s) = %q, want the dynamic loader", ls, interp)
	}
}
