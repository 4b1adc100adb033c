package join

import (
	"strings"
	"testing"
	"time"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func validOptions() Options {
	o := NewOptions("east")
	o.Region, o.Zone = "us-east-1", "us-east-1a"
	return o
}

func TestValidateName(t *testing.T) {
	for _, name := range []string{"east", "a", "us-east-1", strings.Repeat("a", MaxNameLength)} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
	for name, want := range map[string]string{
		"":                                   "required",
		"East":                               "DNS label",
		"east_1":                             "DNS label",
		"-east":                              "DNS label",
		"east.1":                             "DNS label",
		strings.Repeat("a", MaxNameLength+1): "at most 56",
		strings.Repeat("a", 64):              "DNS label",
	} {
		err := ValidateName(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateName(%q) = %v, want an error containing %q", name, err, want)
		}
	}
}

func TestParseLabels(t *testing.T) {
	got, err := ParseLabels([]string{"tier=gold", "example.com/team=db", "empty=", "tier=gold"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["tier"] != "gold" || got["example.com/team"] != "db" || got["empty"] != "" {
		t.Errorf("ParseLabels = %v", got)
	}
	for pair, want := range map[string]string{
		"novalue":                         "want key=value",
		"bad key=x":                       "invalid key",
		"k=bad value":                     "invalid value",
		"k=" + strings.Repeat("v", 64):    "invalid value",
		"dbfleet.io/cluster=x":            "join sets dbfleet.io/cluster itself",
		"app.kubernetes.io/managed-by=me": "join sets",
	} {
		_, err := ParseLabels([]string{pair})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseLabels(%q) = %v, want an error containing %q", pair, err, want)
		}
	}
	if _, err := ParseLabels([]string{"tier=gold", "tier=silver"}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("conflicting labels: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := validOptions()
	if err := o.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"bad name", func(o *Options) { o.Name = "East" }, "DNS label"},
		{"no region", func(o *Options) { o.Region = "" }, "--region is required"},
		{"no zone", func(o *Options) { o.Zone = "" }, "--zone is required"},
		{"long provider", func(o *Options) { o.Provider = strings.Repeat("p", 64) }, "--provider"},
		{"spaces", func(o *Options) { o.Region = " r1" }, "spaces"},
		{"bad label", func(o *Options) { o.Labels = map[string]string{"a b": "c"} }, "invalid key"},
		{"sync mode", func(o *Options) { o.SyncMode = "pull" }, `--sync-mode "pull": use Pull or Push`},
		{"push without kubeconfig", func(o *Options) { o.SyncMode = dbfleetv1alpha1.SyncPush }, "--member-kubeconfig is required"},
		{"pull with kubeconfig", func(o *Options) { o.MemberKubeconfig = []byte("x") }, "--member-kubeconfig is for --sync-mode Push"},
		{"zero heartbeat", func(o *Options) { o.HeartbeatInterval = 0 }, "--heartbeat-interval must be positive"},
		{"negative fence", func(o *Options) { o.FenceAfter = -time.Second }, "--fence-after must be positive"},
		{"fence before heartbeat", func(o *Options) { o.FenceAfter = 5 * time.Second }, "--fence-after (5s) must be longer than --heartbeat-interval (5s)"},
		{"sub-second fence", func(o *Options) { o.HeartbeatInterval, o.FenceAfter = 500*time.Millisecond, 900*time.Millisecond },
			"--fence-after must be at least 1s, got 900ms"},
		{"short token", func(o *Options) { o.TokenExpiration = time.Minute }, "--token-expiration must be at least 10m0s"},
		{"fractional token", func(o *Options) { o.TokenExpiration = time.Hour + time.Millisecond }, "whole seconds"},
		{"http hub", func(o *Options) { o.HubServer = "http://hub:6443" }, "--hub-server"},
		{"hub without host", func(o *Options) { o.HubServer = "https://" }, "--hub-server"},
		{"empty image", func(o *Options) { o.AgentImage = "" }, "--agent-image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.change(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// Every problem at once.
	o = validOptions()
	o.Region, o.HeartbeatInterval = "", 0
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "--region") || !strings.Contains(err.Error(), "--heartbeat-interval") {
		t.Errorf("Validate() = %v, want both problems", err)
	}
	push := validOptions()
	push.SyncMode, push.MemberKubeconfig = dbfleetv1alpha1.SyncPush, []byte("kubeconfig")
	if err := push.Validate(); err != nil {
		t.Errorf("valid Push options: %v", err)
	}
}
