package credentials

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRandomPasswordAlphabetAndLength(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		p, err := randomPassword()
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != passwordLength {
			t.Fatalf("password %q has %d characters, want %d", p, len(p), passwordLength)
		}
		if strings.Trim(p, passwordAlphabet) != "" {
			t.Fatalf("password %q has characters outside the alphabet", p)
		}
		if seen[p] {
			t.Fatalf("password %q drawn twice", p)
		}
		seen[p] = true
	}
}

func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		kind string
		data map[string][]byte
		want string
	}{
		{"superuser", map[string][]byte{"username": []byte("u"), "password": []byte("p")}, ""},
		{"superuser", map[string][]byte{"username": []byte("u")}, `Secret s has no key "password"`},
		{"replication", map[string][]byte{"username": []byte(""), "password": []byte("p")}, `Secret s has no key "username"`},
		{"app", map[string][]byte{"username": []byte("u"), "password": []byte("p")}, `Secret s has no key "dbname"`},
		{"app", map[string][]byte{"username": []byte("u"), "password": []byte("p"), "dbname": []byte("d")}, ""},
		{"app", map[string][]byte{"username": []byte("u"), "password": []byte("it's\n"), "dbname": []byte("d")},
			`Secret s key "password" holds a quote or a backslash ('"\)`},
		{"superuser", map[string][]byte{"username": []byte("u"), "password": []byte("line\nbreak")},
			`Secret s key "password" holds a control character (a newline, say)`},
	} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: tc.data}
		if got := malformed(secret, tc.kind); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.kind, tc.data, got, tc.want)
		}
	}
}

func TestConnectionURIEscapes(t *testing.T) {
	got := connectionURI("orders", "a@b", "p:w/d", "shop")
	if want := "postgresql://a%40b:p%3Aw%2Fd@orders-rw:5432/shop"; got != want {
		t.Errorf("uri %q, want %q", got, want)
	}
}
