package certs

import (
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
