package hubtoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// retryEvery is how soon a renewal that failed (the hub unreachable, say) is tried again.
const retryEvery = 30 * time.Second

// Claims are what the agent reads of its token (a JWT, not verified here: the hub does that).
type Claims struct {
	// Namespace and ServiceAccount the token belongs to.
	Namespace, ServiceAccount string
	IssuedAt, Expires         time.Time
}

// ParseClaims reads a service account token's subject and lifetime.
func ParseClaims(token string) (Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, errors.New("the hub token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Claims{}, fmt.Errorf("the hub token's claims: %w", err)
	}
	var c struct {
		Sub string `json:"sub"`
		Iat int64  `json:"iat"`
		Exp int64  `json:"exp"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return Claims{}, fmt.Errorf("the hub token's claims: %w", err)
	}
	rest, ok := strings.CutPrefix(c.Sub, "system:serviceaccount:")
	ns, name, found := strings.Cut(rest, ":")
	if !ok || !found || c.Exp == 0 || c.Iat == 0 {
		return Claims{}, fmt.Errorf("the hub token is not a service account token with a lifetime (subject %q)", c.Sub)
	}
	return Claims{Namespace: ns, ServiceAccount: name, IssuedAt: time.Unix(c.Iat, 0), Expires: time.Unix(c.Exp, 0)}, nil
}

// RenewAt is when a token issued at iat that expires at exp is renewed: half-way through its
// life, which leaves the other half for retries while the hub is away.
func RenewAt(c Claims) time.Time { return c.IssuedAt.Add(c.Expires.Sub(c.IssuedAt) / 2) }

// Source holds the token in use and puts it on every request to the hub.
type Source struct {
	mu    sync.RWMutex
	token string
}

// Token is the token in use.
func (s *Source) Token() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.token
}

func (s *Source) set(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// Config is cfg authenticating with the Source's token, whichever it is at each request, instead
// of the token it was loaded with. It returns nil when cfg has no token to renew (a client
// certificate, an exec plugin): those are left as they are.
func (s *Source) Config(cfg *rest.Config) *rest.Config {
	if cfg.BearerToken == "" || cfg.BearerTokenFile != "" {
		return nil
	}
	s.set(cfg.BearerToken)
	out := rest.CopyConfig(cfg)
	out.BearerToken = ""
	wrap := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if wrap != nil {
			rt = wrap(rt)
		}
		return &bearer{source: s, next: rt}
	}
	return out
}

type bearer struct {
	source *Source
	next   http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.source.Token())
	return b.next.RoundTrip(req)
}

// Renewer renews the Source's token before it expires. It is a controller-runtime Runnable.
type Renewer struct {
	Source *Source
	// Hub reaches the hub with the Source's token (Source.Config).
	Hub kubernetes.Interface
	// Member writes the renewed kubeconfig into Secret (empty Name: nowhere), key Key, whose
	// data is Kubeconfig with the new token.
	Member     client.Client
	Secret     types.NamespacedName
	Key        string
	Kubeconfig []byte
	// When says when to renew a token (RenewAt when nil).
	When func(Claims) time.Time
	Log  logr.Logger
}

// Start renews until ctx ends.
func (r *Renewer) Start(ctx context.Context) error {
	when := r.When
	if when == nil {
		when = RenewAt
	}
	for {
		claims, err := ParseClaims(r.Source.Token())
		if err != nil {
			r.Log.Info("The hub token is not renewed", "why", err.Error())
			return nil
		}
		wait := time.Until(when(claims))
		r.Log.V(1).Info("Next hub token renewal", "at", time.Now().Add(wait), "expires", claims.Expires)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(max(wait, 0)):
			}
			if err := r.Renew(ctx, claims); err != nil {
				r.Log.Error(err, "Cannot renew the hub token; trying again", "expires", claims.Expires, "retryIn", retryEvery)
				wait = retryEvery
				continue
			}
			break
		}
	}
}

// Renew asks the hub for a new token of the same ServiceAccount and lifetime, puts it in use and
// writes it into the member Secret.
func (r *Renewer) Renew(ctx context.Context, claims Claims) error {
	seconds := int64(claims.Expires.Sub(claims.IssuedAt) / time.Second)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tr, err := r.Hub.CoreV1().ServiceAccounts(claims.Namespace).CreateToken(cctx, claims.ServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("request a token for %s/%s: %w", claims.Namespace, claims.ServiceAccount, err)
	}
	if tr.Status.Token == "" {
		return errors.New("the hub returned no token")
	}
	r.Source.set(tr.Status.Token)
	r.Log.Info("Renewed the hub token", "expires", tr.Status.ExpirationTimestamp.Time)
	if r.Secret.Name == "" {
		return nil
	}
	// Written back so that a restarted agent starts with it; failing that, the agent goes on with
	// the token in memory and says so (the Secret's token still works until it expires).
	if err := r.persist(cctx, tr.Status.Token); err != nil {
		r.Log.Error(err, "The renewed hub token is in use but not saved", "secret", r.Secret.String())
	}
	return nil
}

func (r *Renewer) persist(ctx context.Context, token string) error {
	cfg, err := clientcmd.Load(r.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read the hub kubeconfig: %w", err)
	}
	for _, auth := range cfg.AuthInfos {
		if auth.Token != "" {
			auth.Token = token
		}
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("write the hub kubeconfig: %w", err)
	}
	secret := &corev1.Secret{}
	if err := r.Member.Get(ctx, r.Secret, secret); err != nil {
		return fmt.Errorf("read Secret %s: %w", r.Secret, err)
	}
	before := secret.DeepCopy()
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[r.Key] = data
	if err := r.Member.Patch(ctx, secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("update Secret %s: %w", r.Secret, err)
	}
	r.Kubeconfig = data
	return nil
}

// NeedLeaderElection is false: every replica of the agent holds a token of its own to renew.
func (r *Renewer) NeedLeaderElection() bool { return false }
