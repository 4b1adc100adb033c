package pgsql

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
)

// ClientTLS is the TLS of a connection to another instance, as libpq's sslmode=verify-full
// with a client certificate: the server must show a certificate for serverName under the CA in
// caPEM; the connection shows certPEM (the replication role's, which pg_hba.conf demands).
func ClientTLS(serverName string, caPEM, certPEM, keyPEM []byte) (*tls.Config, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("TLS: no CA certificate to verify servers by")
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("TLS: client certificate: %w", err)
	}
	return &tls.Config{
		ServerName:   serverName,
		RootCAs:      roots,
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}, nil
}
