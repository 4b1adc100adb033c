package ociimage

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ReadArchive opens an OCI image archive that WriteArchive wrote (one image in index.json): it
// unpacks the archive into dir, which must outlive every use of the image (its layers are read
// from there), and returns the image and the name index.json gives it.
func ReadArchive(file, dir string) (v1.Image, string, error) {
	if err := untar(file, dir); err != nil {
		return nil, "", fmt.Errorf("read %s: %w", file, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", file, err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", file, err)
	}
	if len(m.Manifests) != 1 {
		return nil, "", fmt.Errorf("read %s: index.json lists %d manifests, want one image", file, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", file, err)
	}
	return img, m.Manifests[0].Annotations[AnnotationImageName], nil
}

// untar unpacks the regular files of a tar file into dir, refusing paths that leave it.
func untar(file, dir string) (err error) {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		clean := path.Clean(h.Name)
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("entry %q leaves the archive", h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(clean))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, tr)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}

// Push writes img to the registry as ref (registry/repository:tag), authenticating as the
// Docker and Podman credential files say (docker login; none for a registry that needs none).
// insecure allows plain HTTP; go-containerregistry uses it for localhost and 127.0.0.1 anyway.
// It returns the image's digest, which the registry serves it under.
func Push(ctx context.Context, img v1.Image, ref string, insecure bool) (v1.Hash, error) {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	tag, err := name.NewTag(ref, append(opts, name.StrictValidation)...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return digest, nil
}
