package member

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// statusClients keeps, for each share, the HTTPS client that reads its instances' /status: it
// trusts the database's CA alone, for the name every instance's server certificate carries
// (contract.TLSServerName: pod IPs come and go faster than certificates), and shows the agent's
// client certificate (contract.StatusClientName), all from the member's <db>-tls Secret. The member's, never the hub's copy: the agent must see its
// instances while the hub is away (it decides fences on what they say). A client is made again
// when the Secret changes (a rotation), and its idle connections closed.
type statusClients struct {
	mu      sync.Mutex
	clients map[shareKey]statusClient
}

// statusClient is the client made from one version of the Secret: an unreadable one when the
// Secret cannot be used.
type statusClient struct {
	uid     types.UID
	version string
	client  *http.Client
}

// get returns the client for mdb's share, read from member. When the Secret
// cannot be read or used, the client's every request fails with that error: the reads then
// report the instances as they report any they cannot read (busy when their port accepts
// connections, which is no reading at all, never "stopped serving").
func (s *statusClients) get(ctx context.Context, member client.Reader, mdb *dbfleetv1alpha1.MemberDatabase) *http.Client {
	key := shareKey{cluster: mdb.Labels[dbfleetv1alpha1.LabelCluster], NamespacedName: client.ObjectKeyFromObject(mdb)}
	db := mdb.Spec.DatabaseRef
	name := types.NamespacedName{Namespace: db.Namespace, Name: dbfleetv1alpha1.CredentialsSecretName(db.Name, dbfleetv1alpha1.CredentialsTLS)}
	secret := &corev1.Secret{}
	if err := member.Get(ctx, name, secret); err != nil {
		return unreadable(fmt.Errorf("read Secret %s for the instances' /status: %w", name, err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.clients[key]
	if ok && old.uid == secret.UID && old.version == secret.ResourceVersion {
		return old.client
	}
	if ok {
		old.client.CloseIdleConnections()
	}
	c, err := newStatusClient(secret, contract.TLSServerName(db.Name, db.Namespace))
	if err != nil {
		c = unreadable(fmt.Errorf("Secret %s cannot be used for the instances' /status: %w", name, err))
	}
	if s.clients == nil {
		s.clients = map[shareKey]statusClient{}
	}
	s.clients[key] = statusClient{uid: secret.UID, version: secret.ResourceVersion, client: c}
	return c
}

// forget drops the client of a share going away.
func (s *statusClients) forget(key shareKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[key]; ok {
		c.client.CloseIdleConnections()
	}
	delete(s.clients, key)
}

func newStatusClient(secret *corev1.Secret, serverName string) (*http.Client, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(secret.Data[contract.SecretKeyCACert]) {
		return nil, fmt.Errorf("key %s holds no certificate", contract.SecretKeyCACert)
	}
	pair, err := tls.X509KeyPair(secret.Data[contract.SecretKeyStatusClientCert], secret.Data[contract.SecretKeyStatusClientKey])
	if err != nil {
		return nil, fmt.Errorf("keys %s and %s: %w", contract.SecretKeyStatusClientCert, contract.SecretKeyStatusClientKey, err)
	}
	return &http.Client{Transport: &http.Transport{
		// Pod IPs, never through a proxy.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: instanceStatusTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: serverName, Certificates: []tls.Certificate{pair}},
		TLSHandshakeTimeout: instanceStatusTimeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     time.Minute,
	}}, nil
}

// unreadable is a client whose every request fails with err.
func unreadable(err error) *http.Client {
	return &http.Client{Transport: failingTransport{err}}
}

type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }
