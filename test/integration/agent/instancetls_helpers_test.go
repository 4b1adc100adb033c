package agent

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/certs"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// The instances these tests stand in for serve /status over HTTPS as the instance manager does:
// a server certificate of the database's CA for the name the agent verifies, which differs with
// each test's namespace, so it is issued for the name the agent asks for. The agent reads the
// CA and its client certificate from the member's <db>-tls Secret (tlsData).
var (
	instanceCA = sync.OnceValue(func() certs.Pair {
		ca, err := certs.NewCA("agent tests' database CA", time.Now(), certs.CAValidity)
		if err != nil {
			panic(err)
		}
		return ca
	})
	agentClientPair = sync.OnceValue(func() certs.Pair {
		pair, err := certs.Issue(instanceCA(), certs.Request{CommonName: contract.StatusClientName, Usage: certs.Client}, time.Now(), certs.LeafValidity)
		if err != nil {
			panic(err)
		}
		return pair
	})
)

// tlsData is a <db>-tls Secret's data as far as the agent reads it.
func tlsData() map[string][]byte {
	return map[string][]byte{
		contract.SecretKeyCACert:           instanceCA().Cert,
		contract.SecretKeyStatusClientCert: agentClientPair().Cert,
		contract.SecretKeyStatusClientKey:  agentClientPair().Key,
	}
}

// newTLSInstanceServer serves h over HTTPS as an instance manager: its certificate names
// whatever the client asks for, and /status answers only the agent's client certificate.
func newTLSInstanceServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || r.TLS.VerifiedChains[0][0].Subject.CommonName != contract.StatusClientName {
			http.Error(w, "not the agent", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	}))
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(instanceCA().Cert) {
		t.Fatal("the test CA is unreadable")
	}
	srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: roots,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			pair, err := certs.Issue(instanceCA(), certs.Request{CommonName: hello.ServerName, Hosts: []string{hello.ServerName}, Usage: certs.Server}, time.Now(), time.Hour)
			if err != nil {
				return nil, err
			}
			c, err := tls.X509KeyPair(pair.Cert, pair.Key)
			return &c, err
		}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// ensureTLSSecret writes the share's <db>-tls Secret into the member as the agent would from
// the hub's carried copy, unless it is there.
func (s *share) ensureTLSSecret() {
	s.t.Helper()
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: dbfleetv1alpha1.CredentialsSecretName(s.db, dbfleetv1alpha1.CredentialsTLS),
			Labels: map[string]string{specs.LabelManagedBy: specs.ManagedByAgent}},
		Data: tlsData(),
	}
	if err := east.Client.Create(s.ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
}
