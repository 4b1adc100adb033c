package hubtoken

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func jwt(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2ln"
}

func TestParseClaims(t *testing.T) {
	c, err := ParseClaims(jwt(`{"sub":"system:serviceaccount:member-east:dbfleet-agent","iat":1000,"exp":605800}`))
	if err != nil || c.Namespace != "member-east" || c.ServiceAccount != "dbfleet-agent" || c.Expires.Sub(c.IssuedAt) != 168*time.Hour {
		t.Fatalf("%+v, %v", c, err)
	}
	if at := RenewAt(c); !at.Equal(time.Unix(1000, 0).Add(84 * time.Hour)) {
		t.Errorf("RenewAt = %v, want half-way", at)
	}
	for _, bad := range []string{"opaque-token", jwt(`{"sub":"alice","iat":1,"exp":2}`), jwt(`{"sub":"system:serviceaccount:a:b"}`)} {
		if _, err := ParseClaims(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// Every request carries the token in use at its time, not the one the config was loaded with.
func TestSourceConfigSendsTheCurrentToken(t *testing.T) {
	seen := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Authorization")
		fmt.Fprint(w, "{}")
	}))
	defer srv.Close()
	s := &Source{}
	if s.Config(&rest.Config{Host: srv.URL, BearerTokenFile: "/t"}) != nil {
		t.Fatal("a token file was taken over")
	}
	cfg := s.Config(&rest.Config{Host: srv.URL, BearerToken: "first"})
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first", "second"} {
		s.set(want)
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if got := <-seen; got != "Bearer "+want {
			t.Errorf("Authorization %q, want Bearer %s", got, want)
		}
	}
}
