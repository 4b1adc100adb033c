package objectstore

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/pkg/certs"
)

// versitygw is the store make k8s-bins builds: $KUBEBUILDER_ASSETS/versitygw, else bin/k8s's.
func versitygw(t *testing.T) string {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", "bin", "k8s")
	}
	bin := filepath.Join(dir, "versitygw")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v (make k8s-bins builds it)", err)
	}
	return bin
}

// startStore runs a real versitygw over a temporary directory on HTTPS with a CA of the test's.
func startStore(t *testing.T, creds Credentials) (endpoint string, caPEM []byte) {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	ca, err := certs.NewCA("test store CA", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := certs.Issue(ca, certs.Request{CommonName: "store", Hosts: []string{"127.0.0.1"}, Usage: certs.Server}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, leaf.Cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, leaf.Key, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	port, err := process.ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := process.Start(process.Spec{Name: "versitygw",
		Args:    []string{versitygw(t), "--port", port.Addr(), "--cert", certFile, "--key", keyFile, "posix", data},
		Env:     []string{"ROOT_ACCESS_KEY_ID=" + creds.AccessKeyID, "ROOT_SECRET_ACCESS_KEY=" + creds.SecretAccessKey},
		LogFile: filepath.Join(dir, "versitygw.log"), Ports: []*process.Port{port}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = p.Stop(10 * time.Second) })
	err = p.WaitReady(context.Background(), "versitygw", time.Minute, func(ctx context.Context) error {
		c, err := net.DialTimeout("tcp", port.Addr(), time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return "https://" + port.Addr(), ca.Cert
}

func TestAgainstARealStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real S3 server")
	}
	ctx := context.Background()
	root := Credentials{AccessKeyID: "root", SecretAccessKey: "root-secret-0123456789"}
	endpoint, ca := startStore(t, root)
	c, err := New(endpoint, "us-east-1", root, ca)
	if err != nil {
		t.Fatal(err)
	}
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

	var e *Error
	if _, err := c.List(ctx, "missing", ""); !errors.As(err, &e) || e.Code != "NoSuchBucket" {
		t.Errorf("listing a missing bucket: %v, want NoSuchBucket", err)
	}
	wrong, err := New(endpoint, "us-east-1", Credentials{AccessKeyID: "root", SecretAccessKey: "not-the-secret"}, ca)
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
	stranger, err := New(endpoint, "us-east-1", root, other.Cert)
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := stranger.List(ctx, "backups", ""); !errors.As(err, &unknown) {
		t.Errorf("a store whose certificate another CA signed: %v, want an unknown authority", err)
	}
}
