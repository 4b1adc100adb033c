package join

import (
	"context"
	"os"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/hubtoken"
	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestAgentRenewsItsHubToken: the token join mints lives --token-expiration; the agent's
// renewer asks the hub for a new one of its own ServiceAccount (and may ask for no other's),
// every hub client takes it up at once, and it is saved into the kubeconfig Secret, whose
// kubeconfig then authenticates.
func TestAgentRenewsItsHubToken(t *testing.T) {
	ctx := context.Background()
	j := joinCluster(t, "delta", "--token-expiration", "20m")
	cfg, err := clientcmd.RESTConfigFromKubeConfig(j.hubKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	source := &hubtoken.Source{}
	renewing := source.Config(cfg)
	if renewing == nil {
		t.Fatal("join's kubeconfig has no token to renew")
	}
	first, err := hubtoken.ParseClaims(source.Token())
	if err != nil {
		t.Fatal(err)
	}
	if first.Namespace != dbfleetv1alpha1.MemberNamespace("delta") || first.ServiceAccount != join.AgentName ||
		first.Expires.Sub(first.IssuedAt) != 20*time.Minute {
		t.Fatalf("join's token: %+v, want the agent's ServiceAccount in member-delta for 20m", first)
	}
	hub, err := kubernetes.NewForConfig(renewing)
	if err != nil {
		t.Fatal(err)
	}
	asAgent, err := client.New(renewing, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	waitAuthn(t, asAgent, "delta", true)

	// The kubeconfig Secret, as join's manifests make it in the member (here on the hub's API
	// server, as an admin: the member's admission policy is TestMemberManifestsApply's).
	admin := clientFor(t, mustRead(t, adminKubeconfig))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: join.SystemNamespace, Name: join.HubKubeconfigSecret},
		Data: map[string][]byte{join.KubeconfigKey: j.hubKubeconfig}}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: join.SystemNamespace}}); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	renewer := &hubtoken.Renewer{Source: source, Hub: hub, Member: admin, Key: join.KubeconfigKey, Kubeconfig: j.hubKubeconfig,
		Secret: types.NamespacedName{Namespace: join.SystemNamespace, Name: join.HubKubeconfigSecret},
		// The first token at once, the next one never (in this test).
		When: func(c hubtoken.Claims) time.Time {
			if c == first {
				return time.Now()
			}
			return time.Now().Add(time.Hour)
		},
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- renewer.Start(runCtx) }()
	defer func() { cancel(); <-done }()
	var renewed hubtoken.Claims
	err = framework.WaitFor(ctx, framework.DefaultTimeout, "a renewed token in use", func(context.Context) (bool, error) {
		renewed, err = hubtoken.ParseClaims(source.Token())
		return err == nil && renewed != first, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if renewed.ServiceAccount != first.ServiceAccount || renewed.Namespace != first.Namespace ||
		renewed.Expires.Sub(renewed.IssuedAt) != 20*time.Minute || !renewed.Expires.After(first.Expires.Add(-time.Second)) {
		t.Errorf("renewed token %+v after %+v: want the same ServiceAccount and lifetime, ending no sooner", renewed, first)
	}
	allowed(t, "list its MemberDatabases with the renewed token", asAgent.List(ctx, &dbfleetv1alpha1.MemberDatabaseList{},
		client.InNamespace(first.Namespace)))
	seconds := int64(600)
	_, err = hub.CoreV1().ServiceAccounts(first.Namespace).CreateToken(ctx, "default",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	forbidden(t, "ask for a token of another ServiceAccount", err)

	err = framework.WaitFor(ctx, framework.DefaultTimeout, "the renewed token saved", func(ctx context.Context) (bool, error) {
		got := &corev1.Secret{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil {
			return false, err
		}
		saved, err := clientcmd.Load(got.Data[join.KubeconfigKey])
		if err != nil {
			return false, err
		}
		for _, auth := range saved.AuthInfos {
			if auth.Token == source.Token() {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
