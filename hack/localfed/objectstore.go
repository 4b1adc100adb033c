package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/internal/objectstore"
	"github.com/dbfleet/dbfleet/internal/process"
	"github.com/dbfleet/dbfleet/pkg/certs"
)

// The object store backups go to: the Versity S3 gateway (versitygw, built by make k8s-bins)
// serving a directory of the state directory, on HTTPS with a CA of its own, holding one bucket.
// With real nodes it listens on the address of a bridge of its own, outside every node
// (10.<octet>.254.1): like a store no member cluster owns, which every pod reaches through the
// host at the same address. With kwok nodes there are no pods, and it listens on 127.0.0.1.
// object-store.json says where it is and how to sign in (objectstore.Store).

const (
	objectStoreBucket = "dbfleet"
	objectStoreRegion = "us-east-1"
	// storeNodeIndex is the third octet of the store's address; nodes count up from 1.
	storeNodeIndex = 254
)

// planObjectStore gives the store its bridge and address in the real nodes' network.
func planObjectStore(n *layout.Network) {
	n.StoreBridge = n.BridgePrefix + "s"
	n.StoreIP = fmt.Sprintf("10.%d.%d.1", n.Octet, storeNodeIndex)
}

// objectStorePKI is where the store's CA and serving certificate are kept.
func (f *fed) objectStorePKI() string { return f.dir.PKI(layout.ObjectStore) }

// startObjectStore starts the store on a fresh port, makes its bucket and writes
// object-store.json.
func (f *fed) startObjectStore(ctx context.Context) error {
	address := "127.0.0.1"
	if n := f.st.Network; n != nil {
		if err := createBridge(ctx, layout.Node{Bridge: n.StoreBridge, IP: n.StoreIP}); err != nil {
			return fmt.Errorf("%s: its bridge: %w", layout.ObjectStore, err)
		}
		address = n.StoreIP
	}
	dir := f.objectStorePKI()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now()
	ca, err := certs.NewCA("localfed object store CA", now, certs.CAValidity)
	if err != nil {
		return err
	}
	serving, err := certs.Issue(ca, certs.Request{CommonName: "localfed object store", Hosts: []string{address, "localhost"}, Usage: certs.Server,
		IPsAsDNSNames: true}, now, certs.CAValidity)
	if err != nil {
		return err
	}
	caFile, certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for path, data := range map[string][]byte{caFile: ca.Cert, certFile: serving.Cert, keyFile: serving.Key} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(f.dir.ObjectStoreData(), 0o700); err != nil {
		return err
	}
	store := objectstore.Store{Bucket: objectStoreBucket, Region: objectStoreRegion,
		AccessKeyID: "localfed-" + randomHex(4), SecretAccessKey: randomHex(20), CAFile: caFile}
	err = process.RetryOnPortConflict(portAttempts, func() error {
		port, err := process.ReservePort()
		if err != nil {
			return err
		}
		store.Endpoint = "https://" + net.JoinHostPort(address, port.String())
		c := layout.Component{Name: layout.ObjectStore,
			Args: []string{f.bins.versitygw, "--port", net.JoinHostPort(address, port.String()), "--region", store.Region,
				"--cert", certFile, "--key", keyFile, "posix", f.dir.ObjectStoreData()},
			// The root credentials by environment: a command line is for anyone on the host to read.
			Env: []string{"ROOT_ACCESS_KEY_ID=" + store.AccessKeyID, "ROOT_SECRET_ACCESS_KEY=" + store.SecretAccessKey}}
		r, err := f.launch(c, port)
		if err != nil {
			return err
		}
		client, err := objectstore.New(store.Endpoint, store.Region,
			objectstore.Credentials{AccessKeyID: store.AccessKeyID, SecretAccessKey: store.SecretAccessKey}, ca.Cert)
		if err != nil {
			return err
		}
		// Making the bucket is the readiness probe: it answers once the store serves signed requests.
		return waitReady(ctx, r.Name(), time.Minute, func(ctx context.Context) error {
			return client.CreateBucket(ctx, store.Bucket)
		}, r)
	})
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(store, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.dir.ObjectStoreFile(), append(data, '\n'), 0o600); err != nil {
		return err
	}
	say("%s: bucket %s on %s, sign-in and CA in %s", layout.ObjectStore, store.Bucket, store.Endpoint, rel(f.dir.ObjectStoreFile()))
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}
