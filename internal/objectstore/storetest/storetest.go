// Package storetest runs a real S3 store for tests: the versitygw that make k8s-bins builds,
// over a temporary directory, on HTTPS with a CA of the test's, with one bucket.
package storetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/internal/objectstore"
	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/pkg/certs"
)

// Binary is $KUBEBUILDER_ASSETS/versitygw, else bin/k8s's; the test fails when it is missing.
func Binary(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "bin", "k8s")
	}
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v (make k8s-bins builds it)", err)
	}
	return bin
}

// Start runs a store on 127.0.0.1 until the test ends and makes bucket in it (none when bucket
// is ""). The Store it returns names the CA file; its certificate names 127.0.0.1 both as an
// address and as a DNS name, as pgBackRest wants.
func Start(t testing.TB, bucket string) objectstore.Store {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca, err := certs.NewCA("test store CA", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.Issue(ca, certs.Request{CommonName: "store", Hosts: []string{"127.0.0.1"}, Usage: certs.Server, IPsAsDNSNames: true}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	store := objectstore.Store{Bucket: bucket, Region: "us-east-1", AccessKeyID: "test-root", SecretAccessKey: "test-root-secret-0123456789",
		CAFile: filepath.Join(dir, "ca.crt")}
	certFile, keyFile, data := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "data")
	for path, b := range map[string][]byte{store.CAFile: ca.Cert, certFile: leaf.Cert, keyFile: leaf.Key} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	port, err := process.ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	store.Endpoint = "https://" + port.Addr()
	p, err := process.Start(process.Spec{Name: "versitygw",
		Args:    []string{Binary(t), "--port", port.Addr(), "--cert", certFile, "--key", keyFile, "posix", data},
		Env:     []string{"ROOT_ACCESS_KEY_ID=" + store.AccessKeyID, "ROOT_SECRET_ACCESS_KEY=" + store.SecretAccessKey},
		LogFile: filepath.Join(dir, "versitygw.log"), Ports: []*process.Port{port}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = p.Stop(10 * time.Second) })
	c, err := objectstore.New(store.Endpoint, store.Region,
		objectstore.Credentials{AccessKeyID: store.AccessKeyID, SecretAccessKey: store.SecretAccessKey}, ca.Cert)
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(context.Background(), "versitygw", time.Minute, func(ctx context.Context) error {
		if bucket == "" {
			_, err := c.List(ctx, "none", "")
			var e *objectstore.Error
			if errors.As(err, &e) {
				return nil // it answers
			}
			return err
		}
		return c.CreateBucket(ctx, bucket)
	})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// Client is a client of store under its root credentials.
func Client(t testing.TB, store objectstore.Store) *objectstore.Client {
	t.Helper()
	ca, err := os.ReadFile(store.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := objectstore.New(store.Endpoint, store.Region,
		objectstore.Credentials{AccessKeyID: store.AccessKeyID, SecretAccessKey: store.SecretAccessKey}, ca)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
