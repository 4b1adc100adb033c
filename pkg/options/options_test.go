package options

import (
	"strings"
	"testing"
)

func TestValidateBindAddress(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		wantErr string
	}{
		{addr: "0"},
		{addr: ":8080"},
		{addr: "127.0.0.1:0"},
		{addr: "8080", wantErr: "not host:port"},
		{addr: "localhost:http-alt-nope", wantErr: "invalid port"},
		{addr: "", wantErr: "not host:port"},
	} {
		err := ValidateBindAddress(tc.addr)
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("ValidateBindAddress(%q) = %v, want nil", tc.addr, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ValidateBindAddress(%q) = %v, want error containing %q", tc.addr, err, tc.wantErr)
		}
	}
}

func TestManagerValidateNamesFlags(t *testing.T) {
	o := NewManager()
	o.MetricsBindAddress = "nope"
	o.HealthProbeBindAddress = "also-nope"
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want errors for both addresses")
	}
	for _, flag := range []string{"--metrics-bind-address", "--health-probe-bind-address"} {
		if !strings.Contains(err.Error(), flag) {
			t.Errorf("Validate() = %q, want it to name %s", err, flag)
		}
	}
}
