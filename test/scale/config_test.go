package scale

import (
	"os"
	"strings"
	"testing"
)

func TestConfigRejectsBadAPIServerRuntimeSettings(t *testing.T) {
	for _, tc := range []struct {
		gogc  int
		limit string
		want  string // "" for valid
	}{
		{300, "12GiB", ""},
		{0, "", ""},
		{100, "8589934592", ""},
		{-1, "", "GOGC must not be negative"},
		{300, "12G", `"12G" is not a GOMEMLIMIT value`},
		{300, "lots", `"lots" is not a GOMEMLIMIT value`},
	} {
		cfg := DefaultConfig()
		cfg.WorkDir = t.TempDir()
		cfg.APIServerGOGC, cfg.APIServerMemoryLimit = tc.gogc, tc.limit
		err := cfg.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("GOGC %d, GOMEMLIMIT %q: unexpected error %v", tc.gogc, tc.limit, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("GOGC %d, GOMEMLIMIT %q: error %v, want one saying %q", tc.gogc, tc.limit, err, tc.want)
		}
	}
}

// The API server gets the settings; the hub, started afterwards, must not inherit them.
func TestWithEnvRestoresTheEnvironment(t *testing.T) {
	t.Setenv("GOGC", "50")
	t.Setenv("GOMEMLIMIT", "") // restored after the test
	_ = os.Unsetenv("GOMEMLIMIT")
	var inside []string
	err := withEnv(apiServerEnv(DefaultConfig()), func() error {
		inside = []string{os.Getenv("GOGC"), os.Getenv("GOMEMLIMIT")}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside[0] != "300" || inside[1] != "12GiB" {
		t.Errorf("inside: GOGC=%q GOMEMLIMIT=%q, want 300 and 12GiB", inside[0], inside[1])
	}
	if got := os.Getenv("GOGC"); got != "50" {
		t.Errorf("GOGC after: %q, want the earlier 50", got)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		t.Error("GOMEMLIMIT still set after")
	}
}

func TestConfigRejectsANegativeHarnessGOGC(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WorkDir = t.TempDir()
	cfg.HarnessGOGC = -5
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "harness GOGC must not be negative, got -5") {
		t.Errorf("harness GOGC -5: error %v, want one saying it must not be negative", err)
	}
	cfg.HarnessGOGC = 0
	if err := cfg.validate(); err != nil {
		t.Errorf("harness GOGC 0 (leave as it is): unexpected error %v", err)
	}
}
