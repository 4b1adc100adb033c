package app

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/dbfleet/dbfleet/pkg/options"
)

func runHub(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewHubCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// TestJoinFlagValidation checks that bad flags are refused with a message naming them, before
// join reaches for a hub (the kubeconfig here does not exist).
func TestJoinFlagValidation(t *testing.T) {
	noHub := filepath.Join(t.TempDir(), "missing.kubeconfig")
	base := []string{"join", "east", "--kubeconfig", noHub, "--region", "r1", "--zone", "r1-a"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no name", []string{"join", "--region", "r1", "--zone", "z"}, []string{"accepts 1 arg"}},
		{"bad name", []string{"join", "East_1", "--kubeconfig", noHub, "--region", "r1", "--zone", "z"}, []string{"DNS label"}},
		{"long name", []string{"join", strings.Repeat("a", 57), "--kubeconfig", noHub, "--region", "r1", "--zone", "z"}, []string{"at most 56"}},
		{"region and zone required", []string{"join", "east", "--kubeconfig", noHub}, []string{"--region is required", "--zone is required"}},
		{"sync mode", append(base, "--sync-mode", "Both"), []string{`--sync-mode "Both": use Pull or Push`}},
		{"label syntax", append(base, "--label", "tier"), []string{`--label "tier": want key=value`}},
		{"label value", append(base, "--label", "tier=a b"), []string{"invalid value"}},
		{"reserved label", append(base, "--label", "dbfleet.io/cluster=west"), []string{"join sets dbfleet.io/cluster itself"}},
		{"heartbeat", append(base, "--heartbeat-interval", "0s"), []string{"--heartbeat-interval must be positive"}},
		{"fence after heartbeat", append(base, "--heartbeat-interval", "10s", "--fence-after", "10s"), []string{"--fence-after (10s) must be longer than --heartbeat-interval (10s)"}},
		{"negative fence", append(base, "--fence-after", "-1s"), []string{"--fence-after must be positive"}},
		{"sub-second fence", append(base, "--heartbeat-interval", "500ms", "--fence-after", "900ms"), []string{"--fence-after must be at least 1s, got 900ms"}},
		{"token", append(base, "--token-expiration", "1m"), []string{"--token-expiration must be at least 10m0s"}},
		{"hub server", append(base, "--hub-server", "hub:6443"), []string{"--hub-server"}},
		{"push needs kubeconfig", append(base, "--sync-mode", "Push"), []string{"--member-kubeconfig is required with --sync-mode Push"}},
		{"push has no agent", append(base, "--sync-mode", "Push", "--member-kubeconfig", noHub, "--agent-image", "x", "-o", "f"),
			[]string{"--output, --agent-image configure the agent", "load --member-kubeconfig"}},
		{"pull has no member kubeconfig", append(base, "--member-kubeconfig", noHub), []string{"--member-kubeconfig is for --sync-mode Push"}},
		{"member context alone", append(base, "--member-context", "x"), []string{"--member-context needs --member-kubeconfig"}},
		{"ca file", append(base, "--hub-ca-file", noHub), []string{"--hub-ca-file"}},
		{"output format", append(base, "--output-format", "json"), []string{`--output-format "json": use manifests or helm-values`}},
		{"push has no helm values", append(base, "--sync-mode", "Push", "--member-kubeconfig", noHub, "--output-format", "helm-values"),
			[]string{"--output-format configure the agent"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runHub(t, tc.args...)
			if err == nil {
				t.Fatalf("hub %s succeeded:\n%s", strings.Join(tc.args, " "), out)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hub admin kubeconfig") {
				t.Errorf("join reached for the hub despite bad flags: %v", err)
			}
		})
	}
	// Valid flags get as far as loading the hub kubeconfig.
	_, err := runHub(t, base...)
	if err == nil || !strings.Contains(err.Error(), "load the hub admin kubeconfig") {
		t.Errorf("valid flags: %v, want the missing kubeconfig reported", err)
	}
}

func TestUnjoinFlagValidation(t *testing.T) {
	noHub := filepath.Join(t.TempDir(), "missing.kubeconfig")
	if _, err := runHub(t, "unjoin", "East", "--kubeconfig", noHub); err == nil || !strings.Contains(err.Error(), "DNS label") {
		t.Errorf("unjoin East: %v, want a DNS label error", err)
	}
	if _, err := runHub(t, "unjoin", "--kubeconfig", noHub); err == nil || !strings.Contains(err.Error(), "accepts 1 arg") {
		t.Errorf("unjoin without a name: %v", err)
	}
	if _, err := runHub(t, "unjoin", "east", "--force", "--kubeconfig", noHub); err == nil || !strings.Contains(err.Error(), "load the hub admin kubeconfig") {
		t.Errorf("unjoin east: %v, want the missing kubeconfig reported", err)
	}
}

// The commands' own hub clients never watch, so each request gets the timeout; the config the
// caller keeps (the hub endpoint join prints) is left as it was.
func TestDirectConfigBoundsEachRequest(t *testing.T) {
	cfg := &rest.Config{Host: "https://hub.example.com:6443"}
	if got := directConfig(cfg); got.Timeout != options.RequestTimeout || got.Host != cfg.Host {
		t.Errorf("directConfig: timeout %s, host %s; want %s, %s", got.Timeout, got.Host, options.RequestTimeout, cfg.Host)
	}
	if cfg.Timeout != 0 {
		t.Error("directConfig changed the config it was given")
	}
}
