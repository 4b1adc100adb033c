package instance

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/go-logr/logr"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
)

// serverTLS is the HTTPS configuration of the manager's port, made from the TLS material in use
// (the <db>-tls Secret's server certificate and CA) and made again when that changes, so a
// rotated certificate is served from the next handshake on, with no restart. Clients may show a
// certificate; /status asks for one (statusCaller), /healthz and /readyz do not (the kubelet's
// probes show none and verify nothing).
type serverTLS struct {
	material func() pgconf.TLS

	mu   sync.Mutex
	from pgconf.TLS
	cfg  *tls.Config
	err  error
}

func (s *serverTLS) config(*tls.ClientHelloInfo) (*tls.Config, error) {
	t := s.material()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg != nil || s.err != nil {
		if t.ServerCert == s.from.ServerCert && t.ServerKey == s.from.ServerKey && t.CACert == s.from.CACert {
			return s.cfg, s.err
		}
	}
	s.from = t
	s.cfg, s.err = httpsConfig(t)
	return s.cfg, s.err
}

func httpsConfig(t pgconf.TLS) (*tls.Config, error) {
	pair, err := tls.X509KeyPair([]byte(t.ServerCert), []byte(t.ServerKey))
	if err != nil {
		return nil, fmt.Errorf("the server certificate and key: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(t.CACert)) {
		return nil, errors.New("the CA certificate holds no certificate")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    roots,
	}, nil
}

// statusCaller says whether r may read /status: it showed a client certificate that verifies
// under the database's CA for client authentication (the TLS handshake checked that much) and
// names the agent. Other certificates of the CA (the replication role's, which every instance
// holds) do not.
func statusCaller(r *http.Request) (bool, string) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return false, "no client certificate of the database's CA"
	}
	if cn := r.TLS.VerifiedChains[0][0].Subject.CommonName; cn != contract.StatusClientName {
		return false, fmt.Sprintf("the client certificate names %q, not %q", cn, contract.StatusClientName)
	}
	return true, ""
}

// serverErrors turns net/http's error log (TLS handshakes that fail: a port probe that only
// connects, a client without the CA) into the manager's log, where they are debug lines, not
// noise on stderr.
type serverErrors struct{ log logr.Logger }

func (w serverErrors) Write(p []byte) (int, error) {
	w.log.V(1).Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
