package join

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
)

// Options say how to join one cluster.
type Options struct {
	// Name of the MemberCluster: a DNS label of at most MaxNameLength characters.
	Name string
	// Region, Zone and Provider go into the MemberCluster spec. Region and Zone are required.
	Region, Zone, Provider string
	// Labels go onto the MemberCluster, for policies' cluster affinity.
	Labels map[string]string
	// SyncMode is Pull (an agent in the member) or Push (the hub reconciles the member).
	SyncMode dbfleetv1alpha1.SyncMode

	// HubServer is the hub API server URL the agent connects to; empty means the server of the
	// admin kubeconfig join runs with.
	HubServer string
	// HubCA is the PEM CA bundle the agent verifies the hub with; empty means the admin
	// kubeconfig's.
	HubCA []byte
	// AgentImage is the agent's container image.
	AgentImage string
	// HeartbeatInterval and FenceAfter are the agent's timings (see DESIGN: 5 s and 15 s).
	HeartbeatInterval, FenceAfter time.Duration
	// TokenExpiration is the lifetime requested for the agent's hub token. The API server may
	// shorten it (--service-account-max-token-expiration); Result.TokenExpiry says what it granted.
	TokenExpiration time.Duration

	// MemberKubeconfig reaches the member cluster (Push mode only).
	MemberKubeconfig []byte
	// AllowBroadKubeconfig joins a Push member whose kubeconfig holds more rights than the hub
	// needs there (BroadMemberRights), or whose rights join cannot ask, with a warning instead
	// of a refusal.
	AllowBroadKubeconfig bool
}

// Defaults of the optional settings.
const (
	DefaultHeartbeatInterval = 5 * time.Second
	DefaultFenceAfter        = 15 * time.Second
	// DefaultTokenExpiration is the lifetime of the agent's hub token; the agent renews it
	// half-way through (pkg/agent/hubtoken), so an agent down for longer than half of it
	// (3.5 days) still comes back, and one down for longer than all of it is joined again.
	DefaultTokenExpiration = 7 * 24 * time.Hour
	// MinTokenExpiration is the shortest lifetime the TokenRequest API accepts.
	MinTokenExpiration = 10 * time.Minute
)

// NewOptions returns Options with the defaults filled in.
func NewOptions(name string) Options {
	return Options{
		Name:              name,
		SyncMode:          dbfleetv1alpha1.SyncPull,
		AgentImage:        DefaultAgentImage,
		HeartbeatInterval: DefaultHeartbeatInterval,
		FenceAfter:        DefaultFenceAfter,
		TokenExpiration:   DefaultTokenExpiration,
	}
}

// ValidateName checks a cluster name: a DNS label short enough for member-<name>.
func ValidateName(name string) error {
	if name == "" {
		return errors.New("cluster name is required")
	}
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("cluster name %q must be a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit): %s",
			name, strings.Join(msgs, "; "))
	}
	if len(name) > MaxNameLength {
		return fmt.Errorf("cluster name %q is %d characters long, at most %d are allowed (the hub keeps its objects in namespace %s)",
			name, len(name), MaxNameLength, dbfleetv1alpha1.MemberNamespace(name))
	}
	return nil
}

// ParseLabels turns repeated --label k=v values into a map, checking Kubernetes label syntax.
// The dbfleet.io/cluster label is join's own and cannot be given.
func ParseLabels(pairs []string) (map[string]string, error) {
	labels := map[string]string{}
	var errs []error
	for _, pair := range pairs {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("--label %q: want key=value", pair))
			continue
		}
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--label %q: invalid key: %s", pair, strings.Join(msgs, "; ")))
			continue
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--label %q: invalid value: %s", pair, strings.Join(msgs, "; ")))
			continue
		}
		if k == dbfleetv1alpha1.LabelCluster || k == LabelManagedBy {
			errs = append(errs, fmt.Errorf("--label %q: join sets %s itself", pair, k))
			continue
		}
		if old, dup := labels[k]; dup && old != v {
			errs = append(errs, fmt.Errorf("--label %s is given twice, as %q and %q", k, old, v))
			continue
		}
		labels[k] = v
	}
	return labels, errors.Join(errs...)
}

// Validate reports every bad setting at once, naming the flag.
func (o *Options) Validate() error {
	var errs []error
	if err := ValidateName(o.Name); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []struct {
		flag, value string
		required    bool
	}{{"--region", o.Region, true}, {"--zone", o.Zone, true}, {"--provider", o.Provider, false}} {
		switch {
		case f.value == "" && f.required:
			errs = append(errs, fmt.Errorf("%s is required", f.flag))
		case len(f.value) > 63:
			errs = append(errs, fmt.Errorf("%s %q is longer than 63 characters", f.flag, f.value))
		case strings.TrimSpace(f.value) != f.value:
			errs = append(errs, fmt.Errorf("%s %q has leading or trailing spaces", f.flag, f.value))
		}
	}
	if o.Labels != nil {
		pairs := make([]string, 0, len(o.Labels))
		for k, v := range o.Labels {
			pairs = append(pairs, k+"="+v)
		}
		slices.Sort(pairs)
		if _, err := ParseLabels(pairs); err != nil {
			errs = append(errs, err)
		}
	}
	switch o.SyncMode {
	case dbfleetv1alpha1.SyncPull:
		if len(o.MemberKubeconfig) > 0 {
			errs = append(errs, errors.New("--member-kubeconfig is for --sync-mode Push; in Pull mode the agent runs in the member"))
		}
		if o.AllowBroadKubeconfig {
			errs = append(errs, errors.New("--allow-broad-kubeconfig is for --sync-mode Push, whose kubeconfig join checks"))
		}
		errs = append(errs, o.validatePull()...)
	case dbfleetv1alpha1.SyncPush:
		if len(o.MemberKubeconfig) == 0 {
			errs = append(errs, errors.New("--member-kubeconfig is required with --sync-mode Push: the hub reconciles the member through it"))
		}
	default:
		errs = append(errs, fmt.Errorf("--sync-mode %q: use Pull or Push", o.SyncMode))
	}
	return errors.Join(errs...)
}

func (o *Options) validatePull() []error {
	var errs []error
	if o.HubServer != "" {
		if err := validateServerURL(o.HubServer); err != nil {
			errs = append(errs, fmt.Errorf("--hub-server: %w", err))
		}
	}
	if o.AgentImage == "" || strings.ContainsAny(o.AgentImage, " \t\n") {
		errs = append(errs, fmt.Errorf("--agent-image %q: want an image reference such as %s", o.AgentImage, DefaultAgentImage))
	}
	// The agent refuses the same timings at start: catch them here, before its manifests exist.
	errs = append(errs, fence.ValidateTimings(o.HeartbeatInterval, o.FenceAfter)...)
	if o.TokenExpiration < MinTokenExpiration {
		errs = append(errs, fmt.Errorf("--token-expiration must be at least %s (the TokenRequest API's minimum), got %s", MinTokenExpiration, o.TokenExpiration))
	} else if o.TokenExpiration%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--token-expiration must be whole seconds, got %s", o.TokenExpiration))
	}
	return errs
}

func validateServerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q is not an https:// URL with a host", s)
	}
	return nil
}
