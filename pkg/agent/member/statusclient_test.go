package member

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/certs"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/scheme"
)

// The status client of a share comes from its member's <db>-tls Secret: none, or one it cannot
// use, fails every read saying why; the same Secret gives the same client, a changed one a new
// client, verifying the database's name under the new CA.
func TestStatusClientFollowsTheMembersSecret(t *testing.T) {
	ctx := context.Background()
	mdb := &dbfleetv1alpha1.MemberDatabase{
		ObjectMeta: metav1.ObjectMeta{Namespace: "member-east", Name: "shop.orders", Labels: map[string]string{dbfleetv1alpha1.LabelCluster: "east"}},
		Spec:       dbfleetv1alpha1.MemberDatabaseSpec{DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: "orders"}},
	}
	member := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	var clients statusClients
	fails := func(c *http.Client, want string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:1/status", nil)
		_, err := c.Transport.RoundTrip(req)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("read with the client: %v, want an error saying %q", err, want)
		}
	}
	fails(clients.get(ctx, member, mdb), `read Secret shop/orders-tls for the instances' /status`)

	issue := func() map[string][]byte {
		ca, err := certs.NewCA("orders CA", time.Now(), certs.CAValidity)
		if err != nil {
			t.Fatal(err)
		}
		agent, err := certs.Issue(ca, certs.Request{CommonName: contract.StatusClientName, Usage: certs.Client}, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{"ca.crt": ca.Cert, "agent.crt": agent.Cert, "agent.key": agent.Key}
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders-tls"}, Data: map[string][]byte{"ca.crt": []byte("not PEM")}}
	if err := member.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	fails(clients.get(ctx, member, mdb), "Secret shop/orders-tls cannot be used for the instances' /status: key ca.crt holds no certificate")

	secret.Data = issue()
	if err := member.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	first := clients.get(ctx, member, mdb)
	tr, ok := first.Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T, want *http.Transport", first.Transport)
	}
	if cfg := tr.TLSClientConfig; cfg.ServerName != "orders-rw.shop.svc" || len(cfg.Certificates) != 1 || cfg.RootCAs == nil || tr.Proxy != nil {
		t.Errorf("TLS configuration: server name %q, %d client certificates, roots %v, proxy set %v", cfg.ServerName, len(cfg.Certificates), cfg.RootCAs != nil, tr.Proxy != nil)
	}
	if again := clients.get(ctx, member, mdb); again != first {
		t.Error("the same Secret made a new client")
	}
	secret.Data = issue()
	if err := member.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	if rotated := clients.get(ctx, member, mdb); rotated == first {
		t.Error("a changed Secret kept the old client")
	}
	clients.forget(shareKey{cluster: "east", NamespacedName: client.ObjectKeyFromObject(mdb)})
	if len(clients.clients) != 0 {
		t.Errorf("%d clients after the share was forgotten", len(clients.clients))
	}
}
