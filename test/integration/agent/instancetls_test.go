package agent

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// TestAgentReadsInstancesUnderTheDatabasesCA: the agent reads /status only from an instance
// whose certificate its member's <db>-tls Secret's CA signed, for the database's name, showing
// its own client certificate; an instance it cannot verify is no reading (reported unknown, with
// the TLS error), and a changed Secret is taken up without a restart.
func TestAgentReadsInstancesUnderTheDatabasesCA(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	primary := newInstanceServer(t, `{"pod":"orders-0","role":"primary","epoch":1,"timeline":1,"receivedLSN":"0/3000148","replayedLSN":"0/3000148","ready":true}`)
	s.runInstancePod(sts, 0, primary)
	s.setStatefulSetStatus(1)
	s.waitMDB("Available", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue)
	})

	// The member's Secret names another CA (and a client certificate of it): the instance's
	// certificate no longer verifies.
	other, err := certs.NewCA("another database's CA", time.Now(), certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	agentCert, err := certs.Issue(other, certs.Request{CommonName: contract.StatusClientName, Usage: certs.Client}, time.Now(), certs.LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	s.setTLSSecret(map[string][]byte{contract.SecretKeyCACert: other.Cert, contract.SecretKeyStatusClientCert: agentCert.Cert, contract.SecretKeyStatusClientKey: agentCert.Key})
	got := s.waitMDB("the instance unknown, for its certificate", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return len(m.Status.Instances) == 1 && m.Status.Instances[0].Role == dbfleetv1alpha1.InstanceUnknown
	})
	if msg := got.Status.Instances[0].Message; !strings.Contains(msg, "certificate signed by unknown authority") {
		t.Errorf("the unverified instance's message %q does not say why", msg)
	}
	s.setTLSSecret(tlsData())
	s.waitMDB("Available again under the database's CA", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue) &&
			len(m.Status.Instances) == 1 && m.Status.Instances[0].Role == dbfleetv1alpha1.InstanceRunningPrimary
	})
}

// setTLSSecret replaces the data of the share's <db>-tls Secret in the member.
func (s *share) setTLSSecret(data map[string][]byte) {
	s.t.Helper()
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.ns, Name: dbfleetv1alpha1.CredentialsSecretName(s.db, dbfleetv1alpha1.CredentialsTLS)}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := east.Client.Get(s.ctx, key, secret); err != nil {
			return err
		}
		secret.Data = data
		return east.Client.Update(s.ctx, secret)
	}); err != nil {
		s.t.Fatal(err)
	}
}
