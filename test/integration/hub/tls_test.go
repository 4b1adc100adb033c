package hub

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/certs"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestDatabaseTLSIssuedAndCarried: the hub makes a CA per database, issues from it a server
// certificate naming the database's Services and every address its shares report, and the
// replication role's client certificate; the members get the certificates and the CA's
// certificate (the app Secret too), never the CA's key; a new pod address is named by a new
// certificate, carried to every member.
func TestDatabaseTLSIssuedAndCarried(t *testing.T) {
	f := newFixture(t)
	startHubWithCredentials(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	f.policy("spread", 0, map[string]string{"app": "shop"}, divided())
	f.database("shop", 2, map[string]string{"app": "shop"})
	dbc := f.waitDatabase("shop", "CredentialsReady", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, dbfleetv1alpha1.CredentialsReasonReady)
	})

	ca := f.secret(f.ns, "shop-ca")
	if ca.Type != corev1.SecretTypeTLS || len(ca.OwnerReferences) != 1 || ca.OwnerReferences[0].UID != dbc.UID {
		t.Errorf("Secret shop-ca: type %s owners %v, want kubernetes.io/tls owned by the DatabaseCluster", ca.Type, ca.OwnerReferences)
	}
	if err := certs.CheckCA(certs.Pair{Cert: ca.Data["tls.crt"], Key: ca.Data["tls.key"]}); err != nil {
		t.Fatalf("shop-ca: %v", err)
	}
	server := certs.Request{CommonName: "shop-rw." + f.ns + ".svc", Usage: certs.Server,
		Hosts: []string{"shop-rw", "shop-rw." + f.ns + ".svc", "shop-ro." + f.ns + ".svc.cluster.local", "shop-rw." + f.ns + ".svc.clusterset.local"}}
	replication := certs.Request{CommonName: string(f.secret(f.ns, "shop-replication").Data["username"]), Usage: certs.Client}
	tlsSecret := f.secret(f.ns, "shop-tls")
	if p := certs.Problem(certs.Pair{Cert: tlsSecret.Data["tls.crt"], Key: tlsSecret.Data["tls.key"]}, ca.Data["tls.crt"], server, time.Now()); p != "" {
		t.Errorf("server certificate: %s", p)
	}
	if p := certs.Problem(certs.Pair{Cert: tlsSecret.Data["replication.crt"], Key: tlsSecret.Data["replication.key"]}, ca.Data["tls.crt"], replication, time.Now()); p != "" {
		t.Errorf("replication client certificate: %s", p)
	}
	agent := certs.Request{CommonName: "dbfleet-agent", Usage: certs.Client}
	if p := certs.Problem(certs.Pair{Cert: tlsSecret.Data["agent.crt"], Key: tlsSecret.Data["agent.key"]}, ca.Data["tls.crt"], agent, time.Now()); p != "" {
		t.Errorf("the agent's client certificate (for the instances' /status): %s", p)
	}
	if !bytes.Equal(f.secret(f.ns, "shop-app").Data["ca.crt"], ca.Data["tls.crt"]) {
		t.Error("the hub's shop-app Secret does not carry ca.crt")
	}

	f.waitMemberDatabases("shop", map[string]int32{a: 1, b: 1})
	carried := f.waitCarried("shop", a, b)
	for _, cluster := range []string{a, b} {
		if !bytes.Equal(carried[cluster]["tls"].Data["tls.crt"], tlsSecret.Data["tls.crt"]) {
			t.Errorf("the tls copy in %s is not the hub's", cluster)
		}
		if !bytes.Equal(carried[cluster]["app"].Data["ca.crt"], ca.Data["tls.crt"]) {
			t.Errorf("the app copy in %s has no ca.crt", cluster)
		}
		list := &corev1.SecretList{}
		if err := f.c.List(f.ctx, list, client.InNamespace(dbfleetv1alpha1.MemberNamespace(cluster))); err != nil {
			t.Fatal(err)
		}
		for _, s := range list.Items {
			for key, v := range s.Data {
				if bytes.Contains(v, ca.Data["tls.key"]) {
					t.Errorf("the CA's key went to member %s, in Secret %s key %s", cluster, s.Name, key)
				}
			}
		}
	}

	// A standby reports its pod IP (nothing else changes): the certificate is issued again to name it, and carried.
	placed := f.placedMemberDatabases("shop")
	mdb := placed[a]
	fresh := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(mdb), fresh); err != nil {
		t.Fatal(err)
	}
	before := fresh.DeepCopy()
	fresh.Status.Instances = []dbfleetv1alpha1.InstanceStatus{{Pod: "shop-0", Role: dbfleetv1alpha1.InstanceRunningStandby, Address: "10.77.0.9:5432"}}
	if err := f.c.Status().Patch(f.ctx, fresh, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	withIP := server
	withIP.Hosts = append(withIP.Hosts, "10.77.0.9")
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "the certificate carried to b names 10.77.0.9", func(ctx context.Context) (bool, error) {
		c := f.waitCarried("shop", a, b)[b]["tls"]
		return certs.Problem(certs.Pair{Cert: c.Data["tls.crt"], Key: c.Data["tls.key"]}, ca.Data["tls.crt"], withIP, time.Now()) == "", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDatabaseTLSFromTheUsersCA: a CA the user put in <db>-ca before the database (cert-manager's
// shape) issues its certificates and is never written; a <db>-ca that is no CA is reported on
// the DatabaseCluster, and nothing is issued from it.
func TestDatabaseTLSFromTheUsersCA(t *testing.T) {
	f := newFixture(t)
	startHubWithCredentials(t)
	f.member("a", "r1", 100)
	f.policy("spread", 0, map[string]string{"app": "ledger"}, divided())

	own, err := certs.NewCA("ledger's own CA", time.Now(), certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "ledger-ca"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": own.Cert, "tls.key": own.Key, "ca.crt": own.Cert}}
	if err := f.c.Create(f.ctx, mine); err != nil {
		t.Fatal(err)
	}
	f.database("ledger", 1, map[string]string{"app": "ledger"})
	f.waitDatabase("ledger", "CredentialsReady", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, dbfleetv1alpha1.CredentialsReasonReady)
	})
	issued := f.secret(f.ns, "ledger-tls")
	block, _ := pem.Decode(issued.Data["tls.crt"])
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Issuer.CommonName != "ledger's own CA" || !bytes.Equal(issued.Data["ca.crt"], own.Cert) {
		t.Errorf("ledger-tls issued by %q, ca.crt from the user's CA: %v", leaf.Issuer.CommonName, bytes.Equal(issued.Data["ca.crt"], own.Cert))
	}
	if got := f.secret(f.ns, "ledger-ca"); got.ResourceVersion != mine.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Error("the user's CA Secret was written")
	}

	// A leaf where a CA should be.
	notCA, err := certs.Issue(own, certs.Request{CommonName: "leaf", Usage: certs.Server, Hosts: []string{"x"}}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bad := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "broken-ca"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"tls.crt": notCA.Cert, "tls.key": notCA.Key}}
	if err := f.c.Create(f.ctx, bad); err != nil {
		t.Fatal(err)
	}
	f.database("broken", 1, map[string]string{"app": "ledger"})
	d := f.waitDatabase("broken", "CredentialsReady False", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, dbfleetv1alpha1.CredentialsReasonSecretMalformed)
	})
	for _, c := range d.Status.Conditions {
		if c.Type == dbfleetv1alpha1.ConditionCredentialsReady && !strings.Contains(c.Message, "broken-ca") {
			t.Errorf("condition message %q does not name broken-ca", c.Message)
		}
	}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "broken-tls"}, &corev1.Secret{}); err == nil {
		t.Error("certificates were issued from a Secret that is no CA")
	}
}
