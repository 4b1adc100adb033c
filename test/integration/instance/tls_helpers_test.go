package instance

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/certs"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// The database's CA for these tests, and the namespaces created so far: the tests stand in for
// member clusters with namespaces, where a real database has one namespace in every member, so
// each server certificate names the read-write Service of the database in all of them (a
// standby verifies its own namespace's name).
var (
	testCA     = sync.OnceValue(func() certs.Pair { return mustCA("db test CA") })
	namespaces sync.Map
)

func mustCA(name string) certs.Pair {
	ca, err := certs.NewCA(name, time.Now(), certs.CAValidity)
	if err != nil {
		panic(err)
	}
	return ca
}

// serverHosts are the names the instances' server certificates carry: 127.0.0.1 (where the
// tests connect) and every namespace's read-write Service name.
func serverHosts() []string {
	hosts := []string{"127.0.0.1"}
	namespaces.Range(func(k, _ any) bool {
		hosts = append(hosts, contract.TLSServerName(database, k.(string)))
		return true
	})
	sort.Strings(hosts)
	return hosts
}

// writeTLSSecret is a <db>-tls Secret as the hub issues it, from ca, in a directory.
func writeTLSSecret(t *testing.T, ca certs.Pair) string {
	t.Helper()
	dir := t.TempDir()
	writeTLSFiles(t, dir, ca)
	return dir
}

// writeTLSFiles issues a server certificate and the replication role's client certificate
// from ca into dir, each file replaced in one rename as the kubelet does.
func writeTLSFiles(t *testing.T, dir string, ca certs.Pair) {
	t.Helper()
	now := time.Now()
	server, err := certs.Issue(ca, certs.Request{CommonName: "db", Hosts: serverHosts(), Usage: certs.Server}, now, certs.LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	client, err := certs.Issue(ca, certs.Request{CommonName: replication.username, Usage: certs.Client}, now, certs.LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := certs.Issue(ca, certs.Request{CommonName: contract.StatusClientName, Usage: certs.Client}, now, certs.LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's certificate too, as in the hub's Secret (a pod does not mount it; the tests'
	// status reads take it from here).
	for k, v := range map[string][]byte{
		contract.SecretKeyTLSCert: server.Cert, contract.SecretKeyTLSKey: server.Key, contract.SecretKeyCACert: ca.Cert,
		contract.SecretKeyReplicationCert: client.Cert, contract.SecretKeyReplicationKey: client.Key,
		contract.SecretKeyStatusClientCert: agent.Cert, contract.SecretKeyStatusClientKey: agent.Key,
	} {
		rewriteFile(t, filepath.Join(dir, k), string(v))
	}
}

// clientTLS verifies the server at 127.0.0.1 under the test CA; as the replication role it
// shows that role's client certificate from the proc's TLS Secret.
func (p *proc) clientTLS(s secret) (*tls.Config, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(testCA().Cert) {
		return nil, errors.New("the test CA is unreadable")
	}
	cfg := &tls.Config{ServerName: "127.0.0.1", RootCAs: roots, MinVersion: tls.VersionTLS12}
	if s.username == replication.username {
		certPEM, _ := os.ReadFile(filepath.Join(p.secrets[3], contract.SecretKeyReplicationCert))
		keyPEM, _ := os.ReadFile(filepath.Join(p.secrets[3], contract.SecretKeyReplicationKey))
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// statusClient reads the proc's HTTPS port as the agent does: under the CA and with the agent's
// client certificate of the proc's TLS Secret, read afresh (a test may replace them).
func (p *proc) statusClient() (*http.Client, error) {
	read := func(key string) []byte {
		b, _ := os.ReadFile(filepath.Join(p.secrets[3], key))
		return b
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(read(contract.SecretKeyCACert)) {
		return nil, errors.New("the proc's CA is unreadable")
	}
	pair, err := tls.X509KeyPair(read(contract.SecretKeyStatusClientCert), read(contract.SecretKeyStatusClientKey))
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{ServerName: "127.0.0.1", RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}}, nil
}
