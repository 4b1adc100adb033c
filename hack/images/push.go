package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbfleet/dbfleet/hack/images/ociimage"
)

// pushed is one image push did: the archive, where it went and its digest.
type pushed struct {
	file, ref, digest string
}

func pushMain(args []string) error {
	fs := flag.NewFlagSet("images push", flag.ContinueOnError)
	from := fs.String("from", "bin/images", "Directory holding the archives that `images` wrote.")
	repo := fs.String("repo", "", "Registry and path to push to, e.g. registry.example.com/dbfleet: the images go to REPO/hub:TAG and REPO/agent:TAG (required).")
	tag := fs.String("tag", "", "Tag to push (required; make push gives the version).")
	only := fs.String("only", "hub,agent", "Comma-separated images to push (hub, agent).")
	insecure := fs.Bool("insecure", false, "Allow a registry that speaks plain HTTP (localhost and 127.0.0.1 always may).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *repo == "" || *tag == "" {
		return errors.New("push: --repo and --tag are required (make push IMAGE_REPO=registry.example.com/dbfleet)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	_, err := push(ctx, *from, *repo, *tag, strings.Split(*only, ","), *insecure)
	return err
}

// push pushes the archives names (hub, agent) of dir as repo/<name>:tag.
func push(ctx context.Context, dir, repo, tag string, names []string, insecure bool) ([]pushed, error) {
	repo = strings.TrimSuffix(repo, "/")
	tmp, err := os.MkdirTemp("", "dbfleet-push-*")
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	defer os.RemoveAll(tmp)
	var done []pushed
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n != "hub" && n != "agent" {
			return done, fmt.Errorf("push: %q is not an image make push publishes (hub, agent)", n)
		}
		file := filepath.Join(dir, n+".tar")
		if _, err := os.Stat(file); err != nil {
			return done, fmt.Errorf("push: %w (make images writes it)", err)
		}
		unpacked := filepath.Join(tmp, n)
		img, _, err := ociimage.ReadArchive(file, unpacked)
		if err != nil {
			return done, fmt.Errorf("push: %w", err)
		}
		ref := repo + "/" + n + ":" + tag
		start := time.Now()
		fmt.Fprintf(os.Stderr, "[images] pushing %s as %s\n", file, ref)
		digest, err := ociimage.Push(ctx, img, ref, insecure)
		if err != nil {
			return done, err
		}
		fmt.Fprintf(os.Stderr, "[images] %s: %s in %s\n", ref, digest, time.Since(start).Round(100*time.Millisecond))
		done = append(done, pushed{file: file, ref: ref, digest: digest.String()})
	}
	for _, p := range done {
		fmt.Printf("%s@%s\n", p.ref, p.digest)
	}
	return done, nil
}
