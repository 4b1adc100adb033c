package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// AnnotationImageName on a manifest of index.json is the name containerd gives the image it
// imports; AnnotationRefName is the OCI tag.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = "org.opencontainers.image.ref.name"
)

// Entry is one file system object of an image's layer, at Path (absolute, in the image).
// Exactly one of Src (a host file copied as it is), Data, Link (a symlink's target) or Dir is set.
type Entry struct {
	Path     string
	Src      string
	Data     []byte
	Link     string
	Dir      bool
	Mode     fs.FileMode // permission bits (and setgid/sticky); 0: 0755 for dirs, the host's or 0644 for files
	UID, GID int
}

// Config is what a container of the image runs.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	// Labels go into the image config (org.opencontainers.image.* and the like).
	Labels map[string]string
}

// Layer is the set of entries of one layer, keyed by path; parents are added as directories.
type Layer struct {
	entries map[string]Entry
}

// NewLayer returns an empty layer.
func NewLayer() *Layer { return &Layer{entries: map[string]Entry{}} }

// Add puts e into the layer (a later entry at the same path replaces an earlier one).
func (l *Layer) Add(e Entry) {
	e.Path = path.Clean("/" + e.Path)
	l.entries[e.Path] = e
	for d := path.Dir(e.Path); d != "/"; d = path.Dir(d) {
		if _, ok := l.entries[d]; ok {
			break
		}
		l.entries[d] = Entry{Path: d, Dir: true}
	}
}

// Has reports whether the layer has an entry at p.
func (l *Layer) Has(p string) bool {
	_, ok := l.entries[path.Clean("/"+p)]
	return ok
}

// Lookup is the entry p names in the layer, following the layer's symlinks as the kernel
// would in a container of it; false when some part of p is not in the layer.
func (l *Layer) Lookup(p string) (Entry, bool) {
	return l.lookup(path.Clean("/"+p), 0)
}

func (l *Layer) lookup(p string, depth int) (Entry, bool) {
	if depth > 40 {
		return Entry{}, false
	}
	if p == "/" {
		return Entry{Path: "/", Dir: true}, true
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		e, ok := l.entries[next]
		if !ok {
			return Entry{}, false
		}
		if e.Link != "" {
			target := e.Link
			if !path.IsAbs(target) {
				target = path.Join(cur, target)
			}
			return l.lookup(path.Join(append([]string{target}, parts[i+1:]...)...), depth+1)
		}
		if i == len(parts)-1 {
			return e, true
		}
		cur = next
	}
	return Entry{}, false
}

// AddHostPath adds the host's file p at the same path, resolving it as the kernel does: every
// symlink met on the way (a usr-merged /lib, a library's soname link) is added as a symlink, and
// the file it ends at with its content and mode.
func (l *Layer) AddHostPath(p string) error {
	return l.addHostPath(p, 0)
}

func (l *Layer) addHostPath(p string, depth int) error {
	if depth > 40 {
		return fmt.Errorf("add %s: too many symlinks", p)
	}
	p = path.Clean(p)
	if !path.IsAbs(p) {
		return fmt.Errorf("add %s: not an absolute path", p)
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := "/"
	for i, part := range parts {
		next := path.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return fmt.Errorf("add %s: %w", p, err)
		}
		last := i == len(parts)-1
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("add %s: %w", p, err)
			}
			if !l.Has(next) {
				l.Add(Entry{Path: next, Link: target})
			}
			resolved := target
			if !path.IsAbs(target) {
				resolved = path.Join(cur, target)
			}
			return l.addHostPath(path.Join(append([]string{resolved}, parts[i+1:]...)...), depth+1)
		case last && fi.IsDir():
			if !l.Has(next) {
				l.Add(Entry{Path: next, Dir: true, Mode: fi.Mode().Perm()})
			}
		case last:
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("add %s: not a regular file, directory or symlink", p)
			}
			l.Add(Entry{Path: next, Src: next, Mode: fi.Mode().Perm()})
		}
		cur = next
	}
	return nil
}

// AddHostTree adds the host's directory dir and everything under it (files, directories,
// symlinks as symlinks), skipping the paths for which skip returns true.
func (l *Layer) AddHostTree(dir string, skip func(p string) bool) error {
	if err := l.AddHostPath(dir); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("add tree %s: %w", dir, err)
	}
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("add tree %s: %w", dir, err)
		}
		if p == real {
			return nil
		}
		if skip != nil && skip(p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("add tree %s: %w", dir, err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("add tree %s: %w", dir, err)
			}
			l.Add(Entry{Path: p, Link: target})
		case fi.IsDir():
			l.Add(Entry{Path: p, Dir: true, Mode: fi.Mode().Perm()})
		case fi.Mode().IsRegular():
			l.Add(Entry{Path: p, Src: p, Mode: fi.Mode().Perm()})
		}
		return nil
	})
}

// epoch is every entry's modification time, so that the same files make the same layer.
var epoch = time.Unix(0, 0)

// writeTar writes the layer as a tar stream, entries sorted by path (parents first).
func (l *Layer) writeTar(w io.Writer) error {
	paths := make([]string, 0, len(l.entries))
	for p := range l.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		e := l.entries[p]
		h := &tar.Header{Name: strings.TrimPrefix(p, "/"), Uid: e.UID, Gid: e.GID, ModTime: epoch, Format: tar.FormatPAX}
		mode := e.Mode
		var body io.Reader
		switch {
		case e.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
			if mode == 0 {
				mode = 0o755
			}
		case e.Link != "":
			h.Typeflag, h.Linkname, mode = tar.TypeSymlink, e.Link, 0o777
		case e.Src != "":
			fi, err := os.Stat(e.Src)
			if err != nil {
				return fmt.Errorf("layer entry %s: %w", p, err)
			}
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
			if mode == 0 {
				mode = fi.Mode().Perm()
			}
		default:
			h.Typeflag, h.Size, body = tar.TypeReg, int64(len(e.Data)), strings.NewReader(string(e.Data))
			if mode == 0 {
				mode = 0o644
			}
		}
		h.Mode = int64(mode.Perm())
		if mode&fs.ModeSetgid != 0 {
			h.Mode |= 0o2000
		}
		if mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return fmt.Errorf("layer entry %s: %w", p, err)
			}
		} else if e.Src != "" && !e.Dir && e.Link == "" {
			if err := copyFile(tw, e.Src, h.Size); err != nil {
				return fmt.Errorf("layer entry %s: %w", p, err)
			}
		}
	}
	return tw.Close()
}

// copyFile copies the size bytes of file into w; a file that changed size since fails.
func copyFile(w io.Writer, file string, size int64) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size+1))
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("changed while read (%d of %d bytes)", n, size)
	}
	return nil
}

// Image is a single-layer image of l for linux on this machine's architecture. The layer is
// staged as a tar file in tmpDir (removed by the caller with tmpDir).
func Image(l *Layer, cfg Config, tmpDir string) (v1.Image, error) {
	f, err := os.CreateTemp(tmpDir, "layer-*.tar")
	if err != nil {
		return nil, fmt.Errorf("stage layer: %w", err)
	}
	if err := l.writeTar(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("stage layer: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("stage layer: %w", err)
	}
	layer, err := tarball.LayerFromFile(f.Name(), tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint, cf.Config.Cmd = cfg.Entrypoint, cfg.Cmd
	cf.Config.Env, cf.Config.User, cf.Config.WorkingDir = cfg.Env, cfg.User, cfg.WorkingDir
	cf.Config.Labels = cfg.Labels
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

// NormalizeName is the full name containerd's CRI looks an image up by: "postgres:15" is
// "docker.io/library/postgres:15", "dbfleet/agent:dev" is "docker.io/dbfleet/agent:dev".
func NormalizeName(ref string) (string, error) {
	if ref == "" || strings.ContainsAny(ref, " \t\n") {
		return "", fmt.Errorf("image name %q: empty or with white space", ref)
	}
	nameOnly := ref
	if i := strings.Index(nameOnly, "@"); i >= 0 {
		return "", fmt.Errorf("image name %q: a digest is no name to import under", ref)
	}
	if i := strings.LastIndex(nameOnly, ":"); i > strings.LastIndex(nameOnly, "/") {
		nameOnly = nameOnly[:i]
	}
	if nameOnly == ref {
		return "", fmt.Errorf("image name %q: no tag", ref)
	}
	first, _, hasSlash := strings.Cut(ref, "/")
	if hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return ref, nil
	}
	if !hasSlash {
		return "docker.io/library/" + ref, nil
	}
	return "docker.io/" + ref, nil
}

// WriteArchive writes img as an OCI image archive (oci-layout, index.json naming it ref,
// blobs/sha256/...) to file, through a temporary file so a failed write leaves nothing.
func WriteArchive(file, ref string, img v1.Image) error {
	full, err := NormalizeName(ref)
	if err != nil {
		return err
	}
	tag := full[strings.LastIndex(full, ":")+1:]
	dir, err := os.MkdirTemp(filepath.Dir(file), ".oci-layout-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{AnnotationImageName: full, AnnotationRefName: tag})); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	tmp := file + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

// tarDir writes the files under dir into a tar file, paths relative to dir, sorted.
func tarDir(dir, file string) (err error) {
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, out.Close()) }()
	tw := tar.NewWriter(out)
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files = append(files, p)
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(files)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: fi.Size(), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		_, err = io.Copy(tw, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return tw.Close()
}
