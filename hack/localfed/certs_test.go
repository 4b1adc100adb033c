package main

import (
	"encoding/pem"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

// TestHoldsCA: a kubeconfig is written only from a complete apiserver.crt, which kube-apiserver
// creates empty and then fills with its certificate followed by its CA.
func TestHoldsCA(t *testing.T) {
	full, _, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, _ := pem.Decode(full)
	for _, c := range []struct {
		name string
		data []byte
		want bool
	}{
		{"empty", nil, false},
		{"serving certificate only", pem.EncodeToMemory(serving), false},
		{"cut in the CA", full[:len(full)-100], false},
		{"certificate and CA", full, true},
	} {
		if got := holdsCA(c.data); got != c.want {
			t.Errorf("%s: holdsCA = %t, want %t", c.name, got, c.want)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a`:               "/tmp/a",
		`/tmp/with\040space`:   "/tmp/with space",
		`/tmp/tab\011and\134x`: "/tmp/tab\tand\\x",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
