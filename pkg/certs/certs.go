package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Default lifetimes. A leaf is renewed once a third of its life is left, so a hub that is down
// for up to a month still never lets one expire.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 90 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
)

// Usage is what a leaf certificate is for.
type Usage int

const (
	// Server certificates are presented by postgres.
	Server Usage = iota
	// Client certificates authenticate a role (its name is the CommonName).
	Client
)

// Request describes a leaf certificate.
type Request struct {
	CommonName string
	// Hosts are DNS names and IP addresses (server certificates).
	Hosts []string
	// IPsAsDNSNames also writes each IP address of Hosts as a dNSName: pgBackRest 2.45 matches the
	// address it dials against a certificate's dNSNames alone, never its iPAddresses, so a store
	// reached by IP must carry the address as a name too (other clients ignore the extra entry).
	IPsAsDNSNames bool
	Usage         Usage
}

// Pair is a certificate and its private key, PEM encoded.
type Pair struct {
	Cert, Key []byte
}

// NewCA makes a self-signed CA valid from now for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("CA key: %w", err)
	}
	tmpl, err := template(commonName, now, validity)
	if err != nil {
		return Pair{}, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return Pair{}, fmt.Errorf("sign CA: %w", err)
	}
	return encode(der, key)
}

// Issue signs a leaf for req with the CA, valid from now for validity (never past the CA's end).
func Issue(ca Pair, req Request, now time.Time, validity time.Duration) (Pair, error) {
	caCert, caKey, err := parsePair(ca)
	if err != nil {
		return Pair{}, fmt.Errorf("CA: %w", err)
	}
	if !caCert.IsCA {
		return Pair{}, errors.New("CA: the certificate is not a CA (basicConstraints CA:FALSE)")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("key: %w", err)
	}
	tmpl, err := template(req.CommonName, now, validity)
	if err != nil {
		return Pair{}, err
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	switch req.Usage {
	case Server:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, h := range req.Hosts {
			if ip := net.ParseIP(h); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
				if req.IPsAsDNSNames {
					tmpl.DNSNames = append(tmpl.DNSNames, h)
				}
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	case Client:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return Pair{}, fmt.Errorf("sign %s: %w", req.CommonName, err)
	}
	return encode(der, key)
}

// Problem says why leaf does not do for req under the CA whose certificate is caPEM at now
// (it is unreadable, not signed by that CA, for another name or usage, missing a host, or within
// RenewBefore of its end), or "" when it does.
func Problem(leaf Pair, caPEM []byte, req Request, now time.Time) string {
	cert, _, err := parsePair(leaf)
	if err != nil {
		return err.Error()
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return "the CA certificate is unreadable"
	}
	usage := x509.ExtKeyUsageServerAuth
	if req.Usage == Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	// The certificates after the leaf are its chain (an intermediate CA's).
	intermediates := x509.NewCertPool()
	for rest := leaf.Cert; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && !c.Equal(cert) {
			intermediates.AddCert(c)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return "not valid under the CA: " + err.Error()
	}
	if cert.Subject.CommonName != req.CommonName {
		return fmt.Sprintf("issued to %q, not %q", cert.Subject.CommonName, req.CommonName)
	}
	for _, h := range req.Hosts {
		if err := cert.VerifyHostname(h); err != nil {
			return "does not name " + h
		}
	}
	if now.Add(RenewBefore).After(cert.NotAfter) {
		return "expires at " + cert.NotAfter.UTC().Format(time.RFC3339)
	}
	return ""
}

// CheckCA says whether pair is a CA that can issue: a CA certificate whose key matches.
func CheckCA(pair Pair) error {
	cert, _, err := parsePair(pair)
	if err != nil {
		return err
	}
	if !cert.IsCA {
		return errors.New("the certificate is not a CA (basicConstraints CA:FALSE)")
	}
	return nil
}

// NotAfter is the end of the first certificate in certPEM.
func NotAfter(certPEM []byte) (time.Time, error) {
	cert, err := parseCert(certPEM)
	if err != nil {
		return time.Time{}, err
	}
	return cert.NotAfter, nil
}

// SortedHosts removes duplicates and empty names and sorts, so equal sets compare equal.
func SortedHosts(hosts []string) []string {
	out := slices.DeleteFunc(slices.Clone(hosts), func(h string) bool { return h == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

func template(commonName string, now time.Time, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		// An hour back: a member whose clock runs behind the hub's still accepts it.
		NotBefore: now.Add(-time.Hour),
		NotAfter:  now.Add(validity),
	}, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (Pair, error) {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("encode key: %w", err)
	}
	return Pair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func parseCert(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	return cert, nil
}

// parsePair reads the first certificate of pair and its key, and checks that they match.
func parsePair(pair Pair) (*x509.Certificate, crypto.Signer, error) {
	kp, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate and key: %w", err)
	}
	cert, err := x509.ParseCertificate(kp.Certificate[0])
	if err != nil {
		return nil, nil, fmt.Errorf("parse certificate: %w", err)
	}
	signer, ok := kp.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("the key cannot sign")
	}
	return cert, signer, nil
}

// SameCert says whether a and b hold the same first certificate.
func SameCert(a, b []byte) bool {
	ca, errA := parseCert(a)
	cb, errB := parseCert(b)
	return errA == nil && errB == nil && bytes.Equal(ca.Raw, cb.Raw)
}
