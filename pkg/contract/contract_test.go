package contract

import (
	"slices"
	"strings"
	"testing"
)

func TestParseLSN(t *testing.T) {
	for in, want := range map[string]LSN{"0/0": 0, "0/3000060": 0x3000060, "1/0": 1 << 32, "A/FF": 10<<32 | 0xff,
		"16/B374D848": 0x16B374D848, "FFFFFFFF/FFFFFFFF": 1<<64 - 1} {
		got, err := ParseLSN(in)
		if err != nil || got != want {
			t.Errorf("ParseLSN(%q) = %#x, %v; want %#x", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("%#x prints as %q, want %q", uint64(got), got.String(), in)
		}
	}
	for _, in := range []string{"", "0", "3000148", "/1", "1/", "x/1", "100000000/0", "0/100000000", "1/2/3"} {
		if _, err := ParseLSN(in); err == nil {
			t.Errorf("ParseLSN(%q) succeeded, want an error", in)
		}
	}
}

func TestHolder(t *testing.T) {
	if h := Holder("east", 7); h != "east/7" {
		t.Fatalf("Holder = %q", h)
	}
	if c, e, ok := ParseHolder(Holder("us-east-1", 12)); !ok || c != "us-east-1" || e != 12 {
		t.Errorf("ParseHolder(Holder(us-east-1, 12)) = %q, %d, %t", c, e, ok)
	}
	for _, bad := range []string{"", "east", "east/", "/3", "east/0", "east/-1", "east/x", "east/1/2"} {
		if c, e, ok := ParseHolder(bad); ok {
			t.Errorf("ParseHolder(%q) = %q, %d, accepted", bad, c, e)
		}
	}
}

func TestPodNames(t *testing.T) {
	if n := PodName("orders", 1000); n != "orders-1000" {
		t.Fatalf("PodName = %q", n)
	}
	if o, ok := PodOrdinal("orders", "orders-1000"); !ok || o != 1000 {
		t.Errorf("PodOrdinal(orders-1000) = %d, %t", o, ok)
	}
	// A database whose name is another's with a suffix does not own the other's pods.
	for _, bad := range []string{"orders", "orders-", "orders-x", "orders--1", "orders-01", "orders-eu-3", "ledger-1", "orders-99999999999"} {
		if o, ok := PodOrdinal("orders", bad); ok {
			t.Errorf("PodOrdinal(orders, %q) = %d, accepted", bad, o)
		}
	}
	if o, ok := PodOrdinal("orders-eu", "orders-eu-3"); !ok || o != 3 {
		t.Errorf("PodOrdinal(orders-eu, orders-eu-3) = %d, %t", o, ok)
	}
}

func TestAnnotationValues(t *testing.T) {
	for _, tt := range []struct {
		durability string
		number     int
		value      string
	}{{"required", 1, "required 1"}, {"preferred", 2, "preferred 2"}, {"", 1, ""}, {"required", 0, ""}} {
		v := FormatSynchronous(tt.durability, tt.number)
		if v != tt.value {
			t.Errorf("FormatSynchronous(%q, %d) = %q, want %q", tt.durability, tt.number, v, tt.value)
		}
		d, n := ParseSynchronous(v)
		if v != "" && (d != tt.durability || n != tt.number) {
			t.Errorf("ParseSynchronous(%q) = %q, %d", v, d, n)
		}
	}
	for _, bad := range []string{"required", "required x", "sometimes 1", "required -1", " "} {
		if d, n := ParseSynchronous(bad); d != "" || n != 0 {
			t.Errorf("ParseSynchronous(%q) = %q, %d; want asynchronous", bad, d, n)
		}
	}
	names := []string{"orders-1", "orders-2"}
	if got := ParseNames(FormatNames(names)); !slices.Equal(got, names) {
		t.Errorf("names round trip: %q", got)
	}
	if got := ParseNames(" orders-1, ,orders-2 ,"); !slices.Equal(got, names) {
		t.Errorf("ParseNames drops blanks: %q", got)
	}
	if e := ParseEpoch(FormatEpoch(42)); e != 42 {
		t.Errorf("epoch round trip: %d", e)
	}
	for _, bad := range []string{"", "x", "-3"} {
		if e := ParseEpoch(bad); e != 0 {
			t.Errorf("ParseEpoch(%q) = %d, want 0", bad, e)
		}
	}
}

func TestCredentialProblem(t *testing.T) {
	for _, tc := range []struct {
		key, value string
		ok         bool
	}{
		{SecretKeyPassword, "Xk3-pq_9.zz+RT", true},
		{SecretKeyPassword, "with space inside", true},
		{SecretKeyPassword, "ünïcode", true},
		{SecretKeyUsername, "app", true},
		{SecretKeyPassword, "", false},
		{SecretKeyPassword, "it's", false},
		{SecretKeyPassword, `a"b`, false},
		{SecretKeyPassword, `a\b`, false},
		{SecretKeyPassword, "two\nlines", false},
		{SecretKeyPassword, "nul\x00", false},
		{SecretKeyPassword, "\xff\xfe", false},
		{SecretKeyUsername, strings.Repeat("u", 64), false},
		{SecretKeyPassword, strings.Repeat("p", 64), true},
		{SecretKeyDBName, " app", false},
	} {
		problem := CredentialProblem(tc.key, tc.value)
		if (problem == "") != tc.ok {
			t.Errorf("CredentialProblem(%s, %q) = %q, want ok %v", tc.key, tc.value, problem, tc.ok)
		}
		if problem != "" && tc.value != "" && strings.Contains(problem, tc.value) {
			t.Errorf("CredentialProblem(%s, %q) = %q names the value", tc.key, tc.value, problem)
		}
	}
}
