package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/dbfleet/dbfleet/pkg/options"
)

func TestAgentFlagValidation(t *testing.T) {
	valid := func() *agentOptions {
		o := newAgentOptions()
		o.hubKubeconfig, o.clusterName = "/etc/dbfleet/hub.kubeconfig", "east"
		return o
	}
	if err := valid().validate(); err != nil {
		t.Fatalf("defaults with required flags: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*agentOptions)
		want   string
	}{
		{"no hub kubeconfig", func(o *agentOptions) { o.hubKubeconfig = "" }, "--hub-kubeconfig is required"},
		{"no cluster name", func(o *agentOptions) { o.clusterName = "" }, "--cluster-name is required"},
		{"cluster name not a DNS label", func(o *agentOptions) { o.clusterName = "East_1" }, `--cluster-name "East_1"`},
		{"zero heartbeat", func(o *agentOptions) { o.heartbeatInterval = 0 }, "--heartbeat-interval must be positive"},
		{"fence before heartbeat", func(o *agentOptions) { o.fenceAfter = 5 * time.Second }, "--fence-after (5s) must be longer than --heartbeat-interval (5s)"},
		{"sub-second fence", func(o *agentOptions) { o.heartbeatInterval, o.fenceAfter = 500*time.Millisecond, 900*time.Millisecond },
			"--fence-after must be at least 1s, got 900ms"},
		{"bad metrics address", func(o *agentOptions) { o.manager.MetricsBindAddress = "8080" }, "--metrics-bind-address"},
		{"zero member QPS", func(o *agentOptions) { o.memberQPS = 0 }, "--member-kube-api-qps (0) and --member-kube-api-burst (200) must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.change(o)
			err := o.validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate() = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

// The manager-wide flags reach the agent's manager: --concurrent-reconciles (4 by default) and
// --pprof-bind-address were accepted and then ignored, the member reconciler working one share at
// a time whatever they said.
func TestAgentFlagsReachTheManager(t *testing.T) {
	o := newAgentOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.addFlags(fs)
	if got := o.managerOptions(nil).Controller.MaxConcurrentReconciles; got != options.AgentConcurrentReconciles {
		t.Errorf("default MaxConcurrentReconciles = %d, want %d", got, options.AgentConcurrentReconciles)
	}
	if err := fs.Parse([]string{"--concurrent-reconciles=7", "--pprof-bind-address=127.0.0.1:6061", "--fence-after=30s"}); err != nil {
		t.Fatal(err)
	}
	mo := o.managerOptions(nil)
	if mo.Controller.MaxConcurrentReconciles != 7 {
		t.Errorf("MaxConcurrentReconciles = %d, want 7 from --concurrent-reconciles", mo.Controller.MaxConcurrentReconciles)
	}
	if mo.Controller.ReconciliationTimeout != 10*time.Second {
		t.Errorf("ReconciliationTimeout = %s, want 10s from --fence-after=30s: a pass waiting on a dead connection would hold its share", mo.Controller.ReconciliationTimeout)
	}
	if mo.PprofBindAddress != "127.0.0.1:6061" {
		t.Errorf("PprofBindAddress = %q, want 127.0.0.1:6061 from --pprof-bind-address", mo.PprofBindAddress)
	}
}

// The member API server gets its own request limit: the hub's (--kube-api-qps, 20) throttled the
// agent's writes to its own cluster, every primary Lease renewal among them.
func TestAgentMemberRequestLimitIsItsOwn(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "member.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: m, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: m, user: {token: x}}]
contexts: [{name: m, context: {cluster: m, user: m}}]
current-context: m
`), 0o600); err != nil {
		t.Fatal(err)
	}
	o := newAgentOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	o.addFlags(fs)
	if err := fs.Parse([]string{"--kubeconfig", kubeconfig}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.memberRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != options.AgentMemberQPS || cfg.Burst != options.AgentMemberBurst {
		t.Errorf("member limit by default %v/%d, want %v/%d", cfg.QPS, cfg.Burst, options.AgentMemberQPS, options.AgentMemberBurst)
	}
	if err := fs.Parse([]string{"--kube-api-qps=7", "--kube-api-burst=9", "--member-kube-api-qps=50", "--member-kube-api-burst=60"}); err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.memberRESTConfig(); err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != 50 || cfg.Burst != 60 {
		t.Errorf("member limit %v/%d, want 50/60 from --member-kube-api-qps/-burst, not the hub's --kube-api-qps", cfg.QPS, cfg.Burst)
	}
}

// A pass gives up well before a fence deadline, so a pass stuck on an unreachable hub does not
// hold its share's fence back for the minute the hub's controllers get.
func TestAgentPassTimeoutFollowsFenceAfter(t *testing.T) {
	for _, tc := range []struct{ fenceAfter, want time.Duration }{
		{15 * time.Second, 5 * time.Second},
		{8 * time.Second, 3 * time.Second},
		{time.Second, 3 * time.Second},
		{10 * time.Minute, options.ReconcileTimeout},
	} {
		if got := passTimeout(tc.fenceAfter); got != tc.want {
			t.Errorf("passTimeout(%s) = %s, want %s", tc.fenceAfter, got, tc.want)
		}
	}
}
