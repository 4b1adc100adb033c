// Command images builds the container images dbfleet runs, as OCI archives in bin/images/
// (make images), without Docker or a registry:
//
//	pause.tar        ghcr.io/dbfleet/pause:dev     the sandbox image of the local nodes' pods (hack/images/pause)
//	postgres-15.tar  postgres:15                   this machine's PostgreSQL 15 packages
//	agent.tar        ghcr.io/dbfleet/agent:dev     /agent and /dbfleet-instance
//	hub.tar          ghcr.io/dbfleet/hub:dev       /hub
//
// The hub and agent images are static binaries on an empty base with passwd and group, run as
// 65532:65532, and carry the org.opencontainers.image.{version,revision,source} labels of the
// build (--version, default `git describe --tags --always --dirty`; --revision, default the
// commit). Their repositories come from pkg/images, as do the references the install files name.
//
// postgres-15 carries the name the agent gives a database of engine postgres, version "15" and
// no spec.image, so such a database runs as it is once the archive is imported into a node.
//
// --tag T names the hub and agent images R:T instead of R:dev (the archives keep their file names).
//
// `images push --repo R --tag T` pushes bin/images/{hub,agent}.tar as R/hub:T and R/agent:T
// (make push IMAGE_REPO=R).
package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbfleet/dbfleet/hack/images/ociimage"
	"github.com/dbfleet/dbfleet/internal/debpkg"
	"github.com/dbfleet/dbfleet/pkg/images"
)

// The archives' image names; hack/localfed imports the archives and points containerd at
// PauseImage. The local tag "dev" keeps them apart from published images.
const (
	LocalTag      = "dev"
	PauseImage    = images.Registry + "/pause:" + LocalTag
	AgentImage    = images.AgentRepository + ":" + LocalTag
	HubImage      = images.HubRepository + ":" + LocalTag
	PostgresImage = "postgres:15" // what pkg/specs.Image gives engine postgres, version "15"
)

// pgMajor is the PostgreSQL major version of the postgres image, from the host's Debian packages.
const pgMajor = "15"

// nonRoot is the user the hub and agent run as (the distroless "nonroot" uid).
const nonRoot = images.NonRootUser

func main() {
	if len(os.Args) > 1 && os.Args[1] == "push" {
		if err := pushMain(os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "[images] %v\n", err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("out", "bin/images", "Directory to write the archives into.")
	only := flag.String("only", "", "Comma-separated images to build (pause,postgres-15,agent,hub); empty: all.")
	var m buildMeta
	flag.StringVar(&m.version, "version", "", "org.opencontainers.image.version of the hub and agent images (default: git describe --tags --always --dirty, else dev).")
	flag.StringVar(&m.revision, "revision", "", "org.opencontainers.image.revision (default: git rev-parse HEAD, else none).")
	flag.StringVar(&m.source, "source", images.Source, "org.opencontainers.image.source.")
	flag.StringVar(&m.tag, "tag", LocalTag, "The tag the hub and agent archives name their images with (a rebuilt image under a tag of its own, as make test-install upgrades to).")
	flag.Parse()
	m.complete()
	if err := run(*out, *only, m); err != nil {
		fmt.Fprintf(os.Stderr, "[images] %v\n", err)
		os.Exit(1)
	}
}

// buildMeta is what the hub and agent images' labels say of the build.
type buildMeta struct {
	version, revision, source string
	tag                       string // of the hub and agent images; empty: LocalTag
}

// complete fills in the version and revision from git where they were not given.
func (m *buildMeta) complete() {
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	if m.version == "" {
		m.version = git("describe", "--tags", "--always", "--dirty")
	}
	if m.version == "" {
		m.version = "dev"
	}
	if m.revision == "" {
		m.revision = git("rev-parse", "HEAD")
	}
}

// labels are the OCI labels of an image titled title.
func (m buildMeta) labels(title string) map[string]string {
	l := map[string]string{
		images.LabelTitle:   title,
		images.LabelVersion: m.version,
		images.LabelSource:  m.source,
	}
	if m.revision != "" {
		l[images.LabelRevision] = m.revision
	}
	return l
}

type image struct {
	file  string
	name  string
	build func(tmp string, m buildMeta) (*ociimage.Layer, ociimage.Config, error)
}

func run(out, only string, m buildMeta) error {
	all := []image{
		{"pause.tar", PauseImage, pauseImage},
		{"postgres-" + pgMajor + ".tar", PostgresImage, postgresImage},
		{"agent.tar", AgentImage, agentImage},
		{"hub.tar", HubImage, hubImage},
	}
	if m.tag != "" && m.tag != LocalTag {
		all[2].name = images.AgentRepository + ":" + m.tag
		all[3].name = images.HubRepository + ":" + m.tag
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	for n := range want {
		known := false
		for _, im := range all {
			known = known || strings.TrimSuffix(im.file, ".tar") == n
		}
		if !known {
			return fmt.Errorf("--only %s: no such image (pause, postgres-%s, agent, hub)", n, pgMajor)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	tmp, err := os.MkdirTemp(out, ".build-*")
	if err != nil {
		return fmt.Errorf("create a build directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	for _, im := range all {
		if len(want) > 0 && !want[strings.TrimSuffix(im.file, ".tar")] {
			continue
		}
		start := time.Now()
		fmt.Fprintf(os.Stderr, "[images] %s: building %s\n", im.file, im.name)
		layer, cfg, err := im.build(tmp, m)
		if err != nil {
			return fmt.Errorf("%s: %w", im.file, err)
		}
		img, err := ociimage.Image(layer, cfg, tmp)
		if err != nil {
			return fmt.Errorf("%s: %w", im.file, err)
		}
		file := filepath.Join(out, im.file)
		if err := ociimage.WriteArchive(file, im.name, img); err != nil {
			return fmt.Errorf("%s: %w", im.file, err)
		}
		fi, err := os.Stat(file)
		if err != nil {
			return fmt.Errorf("%s: %w", im.file, err)
		}
		fmt.Fprintf(os.Stderr, "[images] %s: %s, %.1f MB, in %s\n", file, im.name, float64(fi.Size())/1e6, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// moduleRoot is the directory of this module's go.mod, which goBuild's package paths are
// relative to (the tests run in hack/images).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the dbfleet module (go env GOMOD is %q)", mod)
	}
	return filepath.Dir(mod), nil
}

// goBuild builds a static binary of pkg (a package of this module) into tmp.
func goBuild(tmp, name, pkg string) (string, error) {
	bin := filepath.Join(tmp, name)
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", pkg, err)
	}
	return bin, nil
}

// base is what every image has: /etc/passwd and /etc/group (root, postgres 999, nonroot
// 65532), a world-writable /tmp.
func base() *ociimage.Layer {
	l := ociimage.NewLayer()
	l.Add(ociimage.Entry{Path: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/bin/sh\npostgres:x:999:999:PostgreSQL administrator:/var/lib/postgresql:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")})
	l.Add(ociimage.Entry{Path: "/etc/group", Data: []byte("root:x:0:\npostgres:x:999:\nnonroot:x:65532:\n")})
	l.Add(ociimage.Entry{Path: "/tmp", Dir: true, Mode: 0o777 | fs.ModeSticky})
	return l
}

func pauseImage(tmp string, _ buildMeta) (*ociimage.Layer, ociimage.Config, error) {
	bin, err := goBuild(tmp, "pause", "./hack/images/pause")
	if err != nil {
		return nil, ociimage.Config{}, err
	}
	l := ociimage.NewLayer()
	l.Add(ociimage.Entry{Path: "/pause", Src: bin, Mode: 0o755})
	return l, ociimage.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}, nil
}

func hubImage(tmp string, m buildMeta) (*ociimage.Layer, ociimage.Config, error) {
	bin, err := goBuild(tmp, "hub", "./cmd/hub")
	if err != nil {
		return nil, ociimage.Config{}, err
	}
	l := base()
	l.Add(ociimage.Entry{Path: "/hub", Src: bin, Mode: 0o755})
	return l, ociimage.Config{Entrypoint: []string{"/hub"}, User: nonRoot, Labels: m.labels("dbfleet hub")}, nil
}

// agentImage carries the agent and dbfleet-instance: the agent's --instance-image init container
// runs "/dbfleet-instance --copy-to=..." of this image (pkg/agent/member/postgres.go).
func agentImage(tmp string, m buildMeta) (*ociimage.Layer, ociimage.Config, error) {
	agent, err := goBuild(tmp, "agent", "./cmd/agent")
	if err != nil {
		return nil, ociimage.Config{}, err
	}
	inst, err := goBuild(tmp, "dbfleet-instance", "./cmd/instance")
	if err != nil {
		return nil, ociimage.Config{}, err
	}
	l := base()
	l.Add(ociimage.Entry{Path: "/agent", Src: agent, Mode: 0o755})
	l.Add(ociimage.Entry{Path: "/dbfleet-instance", Src: inst, Mode: 0o755})
	return l, ociimage.Config{Entrypoint: []string{"/agent"}, User: nonRoot, Labels: m.labels("dbfleet agent")}, nil
}

// The host's PostgreSQL packages (Debian's layout, as the official image has it too).
var (
	pgLib   = "/usr/lib/postgresql/" + pgMajor
	pgShare = "/usr/share/postgresql/" + pgMajor
	// pgbackrest archives WAL and takes and restores backups (Debian's package of the version
	// DESIGN.md names); it is installed where missing (hostPackage).
	pgbackrest = "/usr/bin/pgbackrest"
	// Tools of the entrypoint script, and the shell (the official image has a shell too).
	shellTools = []string{"/bin/sh", "/bin/cat", "/bin/chmod", "/bin/chown", "/bin/id", "/bin/ls", "/bin/mkdir", "/bin/rm", "/usr/bin/setpriv"}
)

// entrypoint is the postgres image's /usr/local/bin/docker-entrypoint.sh.
//
//go:embed entrypoint.sh
var entrypoint []byte

// postgresImage is PostgreSQL 15 from this machine's packages: /usr/lib/postgresql/15 (without
// the LLVM JIT, whose library alone is larger than the rest), /usr/share/postgresql/15, the time
// zone data, pgbackrest, the shared libraries all of it links (ldd), a shell and the entrypoint's
// tools, the postgres user as uid 999, PATH and PGDATA as the official image sets them.
func postgresImage(string, buildMeta) (*ociimage.Layer, ociimage.Config, error) {
	if err := hostPackage(filepath.Join(pgLib, "bin", "postgres"), "postgresql-"+pgMajor); err != nil {
		return nil, ociimage.Config{}, fmt.Errorf("the postgres image is made from this machine's PostgreSQL %s packages: %w", pgMajor, err)
	}
	if err := hostPackage(pgbackrest, "pgbackrest"); err != nil {
		return nil, ociimage.Config{}, fmt.Errorf("the postgres image carries this machine's pgbackrest: %w", err)
	}
	l := base()
	skip := func(p string) bool {
		b := filepath.Base(p)
		return strings.HasPrefix(b, "llvmjit") || (b == "bitcode" && filepath.Dir(p) == filepath.Join(pgLib, "lib"))
	}
	for _, dir := range []string{pgLib, pgShare, "/usr/share/zoneinfo"} {
		if err := l.AddHostTree(dir, skip); err != nil {
			return nil, ociimage.Config{}, err
		}
	}
	var elfs []string
	if err := filepath.WalkDir(pgLib, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if skip(p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type().IsRegular() && isELF(p) {
			elfs = append(elfs, p)
		}
		return nil
	}); err != nil {
		return nil, ociimage.Config{}, fmt.Errorf("list %s: %w", pgLib, err)
	}
	for _, t := range append([]string{pgbackrest}, shellTools...) {
		if err := l.AddHostPath(t); err != nil {
			return nil, ociimage.Config{}, err
		}
		elfs = append(elfs, t)
	}
	libs, err := lddClosure(elfs)
	if err != nil {
		return nil, ociimage.Config{}, err
	}
	for _, lib := range libs {
		if err := l.AddHostPath(lib); err != nil {
			return nil, ociimage.Config{}, err
		}
	}
	l.Add(ociimage.Entry{Path: "/usr/local/bin/docker-entrypoint.sh", Data: entrypoint, Mode: 0o755})
	l.Add(ociimage.Entry{Path: "/var/lib/postgresql", Dir: true, Mode: 0o755, UID: 999, GID: 999})
	l.Add(ociimage.Entry{Path: "/var/lib/postgresql/data", Dir: true, Mode: 0o700, UID: 999, GID: 999})
	l.Add(ociimage.Entry{Path: "/var/run/postgresql", Dir: true, Mode: 0o2775 | fs.ModeSetgid, UID: 999, GID: 999})
	return l, ociimage.Config{
		Entrypoint: []string{"/usr/local/bin/docker-entrypoint.sh"},
		Cmd:        []string{"postgres"},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + pgLib + "/bin",
			"PG_MAJOR=" + pgMajor,
			"PGDATA=/var/lib/postgresql/data",
		},
	}, nil
}

// hostPackage makes sure path exists, installing the Debian package pkg with apt-get when it does
// not and this runs as root (as .ci/run and localfed up install theirs); otherwise it says what
// to install.
func hostPackage(path, pkg string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return fmt.Errorf("%s is missing: install the Debian package %s (apt-get install %s, as root)", path, pkg, pkg)
	}
	fmt.Printf("[images] installing the Debian package %s (apt-get, as root) for %s\n", pkg, path)
	if err := debpkg.Install(context.Background(), pkg); err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("apt-get installed %s but %w", pkg, err)
	}
	return nil
}

func isELF(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = f.Read(magic)
	return err == nil && bytes.Equal(magic, []byte("\x7fELF"))
}

// lddClosure is every shared library the files need, as ldd resolves them on this machine (ldd
// lists the whole closure, the dynamic loader too). One ldd run reads all the files.
func lddClosure(files []string) ([]string, error) {
	if len(files) == 0 {
		return nil, nil
	}
	// ldd exits 1 when some file is static ("not a dynamic executable"); its output still lists
	// the others, each after a "file:" line.
	out, err := exec.Command("ldd", files...).Output()
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("ldd: %w", err)
	}
	seen := map[string]bool{}
	var libs []string
	file := files[0]
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		if !strings.HasPrefix(raw, "\t") && strings.HasSuffix(line, ":") {
			file = strings.TrimSuffix(line, ":")
			continue
		}
		if strings.Contains(line, "not found") {
			return nil, fmt.Errorf("ldd %s: %s", file, line)
		}
		var lib string
		if _, after, ok := strings.Cut(line, "=> "); ok {
			lib, _, _ = strings.Cut(after, " (")
		} else if strings.HasPrefix(line, "/") {
			lib, _, _ = strings.Cut(line, " (")
		}
		if lib = strings.TrimSpace(lib); strings.HasPrefix(lib, "/") && !seen[lib] {
			seen[lib] = true
			libs = append(libs, lib)
		}
	}
	return libs, nil
}
