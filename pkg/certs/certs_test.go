package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIssuedCertificatesVerifyAndAgeOut(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("db CA", now, CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	req := Request{CommonName: "db", Hosts: []string{"db-rw.ns.svc", "10.1.2.3"}, Usage: Server}
	leaf, err := Issue(ca, req, now, LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	if p := Problem(leaf, ca.Cert, req, now); p != "" {
		t.Fatalf("a fresh leaf: %s", p)
	}
	more := req
	more.Hosts = append(more.Hosts, "10.9.9.9")
	if p := Problem(leaf, ca.Cert, more, now); !strings.Contains(p, "10.9.9.9") {
		t.Fatalf("a new address: %q, want it named", p)
	}
	if p := Problem(leaf, ca.Cert, req, now.Add(LeafValidity-RenewBefore+time.Hour)); !strings.Contains(p, "expires") {
		t.Fatalf("near its end: %q, want expires", p)
	}
	other, _ := NewCA("other", now, CAValidity)
	if p := Problem(leaf, other.Cert, req, now); !strings.Contains(p, "not valid under the CA") {
		t.Fatalf("another CA: %q", p)
	}
	client := Request{CommonName: "streaming_replica", Usage: Client}
	if p := Problem(leaf, ca.Cert, client, now); p == "" {
		t.Fatal("a server certificate passed as a client one")
	}
	if _, err := Issue(leaf, req, now, LeafValidity); err == nil || !strings.Contains(err.Error(), "not a CA") {
		t.Fatalf("issuing from a leaf: %v", err)
	}
	if err := CheckCA(Pair{Cert: ca.Cert, Key: leaf.Key}); err == nil {
		t.Fatal("a CA with another key passed")
	}
}

// A CA that is an intermediate: its leaves carry it as their chain and verify under the root.
func TestLeavesOfAnIntermediateVerifyUnderTheRoot(t *testing.T) {
	now := time.Now()
	root := caFor(t, "root", nil)
	mid := caFor(t, "intermediate", &root)
	req := Request{CommonName: "db", Hosts: []string{"db-rw"}, Usage: Server}
	leaf, err := Issue(mid, req, now, LeafValidity)
	if err != nil {
		t.Fatal(err)
	}
	if p := Problem(leaf, root.Cert, req, now); p == "" {
		t.Fatal("a leaf without its chain verified under the root")
	}
	leaf.Cert = append(leaf.Cert, mid.Cert...)
	if p := Problem(leaf, root.Cert, req, now); p != "" {
		t.Fatalf("a leaf with its chain: %s", p)
	}
}

// caFor makes a CA signed by parent (nil: by itself) that may sign further CAs, as users' roots do.
func caFor(t *testing.T, name string, parent *Pair) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := template(name, time.Now(), CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	signer, signerKey := tmpl, any(key)
	if parent != nil {
		cert, k, err := parsePair(*parent)
		if err != nil {
			t.Fatal(err)
		}
		signer, signerKey = cert, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := encode(der, key)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func TestIPsAsDNSNamesNameAnAddressBothWays(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("store CA", now, CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	for _, asNames := range []bool{false, true} {
		leaf, err := Issue(ca, Request{CommonName: "store", Hosts: []string{"10.200.254.1", "localhost"}, Usage: Server, IPsAsDNSNames: asNames}, now, LeafValidity)
		if err != nil {
			t.Fatal(err)
		}
		cert, _, err := parsePair(leaf)
		if err != nil {
			t.Fatal(err)
		}
		if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("10.200.254.1")) {
			t.Errorf("IPsAsDNSNames %v: iPAddresses %v, want 10.200.254.1", asNames, cert.IPAddresses)
		}
		want := []string{"localhost"}
		if asNames {
			want = []string{"10.200.254.1", "localhost"}
		}
		if !slices.Equal(cert.DNSNames, want) {
			t.Errorf("IPsAsDNSNames %v: dNSNames %v, want %v", asNames, cert.DNSNames, want)
		}
		if err := cert.VerifyHostname("10.200.254.1"); err != nil {
			t.Errorf("IPsAsDNSNames %v: %v", asNames, err)
		}
	}
}
