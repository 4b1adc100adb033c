package objectstore_test

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/internal/objectstore"
	"github.com/dbfleet/dbfleet/internal/objectstore/storetest"
	"github.com/dbfleet/dbfleet/pkg/certs"
)

func TestAgainstARealStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real S3 server")
	}
	ctx := context.Background()
	store := storetest.Start(t, "")
	ca, err := os.ReadFile(store.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	root := objectstore.Credentials{AccessKeyID: store.AccessKeyID, SecretAccessKey: store.SecretAccessKey}
	endpoint := store.Endpoint
	c := storetest.Client(t, store)
	if err := c.CreateBucket(ctx, "backups"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateBucket(ctx, "backups"); err != nil {
		t.Fatalf("creating a bucket one owns again: %v", err)
	}
	for _, key := range []string{"db/archive/a", "db/archive/b", "db/backup/c", "other/d"} {
		if err := c.Put(ctx, "backups", key, []byte("content of "+key)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.Get(ctx, "backups", "db/archive/b")
	if err != nil || string(got) != "content of db/archive/b" {
		t.Fatalf("get: %q, %v", got, err)
	}
	objs, err := c.List(ctx, "backups", "db/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	if want := []string{"db/archive/a", "db/archive/b", "db/backup/c"}; !slices.Equal(keys, want) {
		t.Fatalf("list db/: %v, want %v", keys, want)
	}

	var e *objectstore.Error
	if _, err := c.List(ctx, "missing", ""); !errors.As(err, &e) || e.Code != "NoSuchBucket" {
		t.Errorf("listing a missing bucket: %v, want NoSuchBucket", err)
	}
	wrong, err := objectstore.New(endpoint, "us-east-1", objectstore.Credentials{AccessKeyID: root.AccessKeyID, SecretAccessKey: "not-the-secret"}, ca)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.List(ctx, "backups", ""); !errors.As(err, &e) || e.Code != "SignatureDoesNotMatch" {
		t.Errorf("a wrong secret: %v, want SignatureDoesNotMatch", err)
	}
	other, err := certs.NewCA("another CA", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := objectstore.New(endpoint, "us-east-1", root, other.Cert)
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := stranger.List(ctx, "backups", ""); !errors.As(err, &unknown) {
		t.Errorf("a store whose certificate another CA signed: %v, want an unknown authority", err)
	}
}
