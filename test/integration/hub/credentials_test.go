package hub

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub/credentials"
	"github.com/dbfleet/dbfleet/pkg/hub/databasecluster"
	"github.com/dbfleet/dbfleet/test/framework"
)

func startHubWithCredentials(t *testing.T) {
	t.Helper()
	startHubWith(t, func(ctx context.Context, mgr ctrlManager) error {
		if err := databasecluster.Setup(ctx, mgr, hubConfig()); err != nil {
			return err
		}
		return credentials.Setup(ctx, mgr)
	})
}

func (f *fixture) secret(namespace, name string) *corev1.Secret {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
		f.t.Fatal(err)
	}
	return s
}

// waitCarried waits until exactly the given clusters hold copies of the database's four
// credentials Secrets, and returns them by cluster and kind.
func (f *fixture) waitCarried(db string, clusters ...string) map[string]map[string]*corev1.Secret {
	f.t.Helper()
	var got map[string]map[string]*corev1.Secret
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "credentials carried to "+strings.Join(clusters, ","), func(ctx context.Context) (bool, error) {
		list := &corev1.SecretList{}
		if err := f.c.List(ctx, list, client.MatchingLabels{
			dbfleetv1alpha1.LabelDatabase: db, dbfleetv1alpha1.LabelDatabaseNamespace: f.ns,
		}); err != nil {
			return false, err
		}
		got = map[string]map[string]*corev1.Secret{}
		for i := range list.Items {
			s := &list.Items[i]
			cluster := s.Labels[dbfleetv1alpha1.LabelCluster]
			if got[cluster] == nil {
				got[cluster] = map[string]*corev1.Secret{}
			}
			got[cluster][s.Labels[dbfleetv1alpha1.LabelCredentials]] = s
		}
		if len(got) != len(clusters) {
			return false, nil
		}
		for _, c := range clusters {
			if len(got[c]) != len(dbfleetv1alpha1.CredentialKinds) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		have := map[string]int{}
		for c, m := range got {
			have[c] = len(m)
		}
		f.t.Fatalf("%v; have %v", err, have)
	}
	return got
}

func TestCredentialsCreatedAndCarried(t *testing.T) {
	f := newFixture(t)
	startHubWithCredentials(t)
	a, b := f.member("a", "r1", 100), f.member("b", "r2", 100)
	f.policy("spread", 0, map[string]string{"app": "orders"}, divided())

	// The user brings their own app credentials, without a uri.
	own := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "orders-app"},
		Data: map[string][]byte{
			"username": []byte("shop"), "password": []byte("chosen-by-me"), "dbname": []byte("shop"),
		},
	}
	if err := f.c.Create(f.ctx, own); err != nil {
		t.Fatal(err)
	}
	f.database("orders", 2, map[string]string{"app": "orders"})
	dbc := f.waitDatabase("orders", "CredentialsReady", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, dbfleetv1alpha1.CredentialsReasonReady)
	})

	for _, kind := range []string{"superuser", "replication"} {
		s := f.secret(f.ns, "orders-"+kind)
		if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != dbc.UID || s.Labels[dbfleetv1alpha1.LabelCredentials] != kind {
			t.Errorf("Secret orders-%s: owners %v labels %v, want owned by the DatabaseCluster and labelled", kind, s.OwnerReferences, s.Labels)
		}
		for _, key := range []string{"username", "password", "dbname", "uri"} {
			if len(s.Data[key]) == 0 {
				t.Errorf("Secret orders-%s has no %s", kind, key)
			}
		}
		if p := s.Data["password"]; len(p) != 32 {
			t.Errorf("Secret orders-%s password has %d characters, want 32", kind, len(p))
		}
		if !bytes.Contains(s.Data["uri"], s.Data["password"]) || !bytes.HasPrefix(s.Data["uri"], []byte("postgresql://")) {
			t.Errorf("Secret orders-%s uri %q does not carry its password", kind, s.Data["uri"])
		}
	}
	if su, rep := f.secret(f.ns, "orders-superuser"), f.secret(f.ns, "orders-replication"); bytes.Equal(su.Data["password"], rep.Data["password"]) {
		t.Error("superuser and replication passwords are equal")
	}
	mine := f.secret(f.ns, "orders-app")
	if mine.ResourceVersion != own.ResourceVersion || len(mine.OwnerReferences) != 0 || len(mine.Labels) != 0 {
		t.Errorf("the user's Secret was written: resourceVersion %s→%s, owners %v, labels %v",
			own.ResourceVersion, mine.ResourceVersion, mine.OwnerReferences, mine.Labels)
	}

	f.waitMemberDatabases("orders", map[string]int32{a: 1, b: 1})
	carried := f.waitCarried("orders", a, b)
	for _, cluster := range []string{a, b} {
		app := carried[cluster]["app"]
		if app.Namespace != dbfleetv1alpha1.MemberNamespace(cluster) || app.Name != f.ns+".orders-app" {
			t.Errorf("app copy is %s/%s", app.Namespace, app.Name)
		}
		if string(app.Data["username"]) != "shop" || string(app.Data["password"]) != "chosen-by-me" || string(app.Data["dbname"]) != "shop" {
			t.Errorf("app copy in %s holds %q/%q/%q, want the user's", cluster, app.Data["username"], app.Data["password"], app.Data["dbname"])
		}
		if !strings.HasPrefix(string(app.Data["uri"]), "postgresql://shop:chosen-by-me@orders-rw:5432/shop") {
			t.Errorf("app copy in %s has uri %q", cluster, app.Data["uri"])
		}
		su := carried[cluster]["superuser"]
		if !bytes.Equal(su.Data["password"], f.secret(f.ns, "orders-superuser").Data["password"]) {
			t.Errorf("superuser copy in %s differs from the source", cluster)
		}
	}

	// The share on one cluster leaves the placement: its copies stay while the evicted share is
	// kept (it still runs), and go with it once the remaining share reports ready.
	f.updateDatabase("orders", func(d *dbfleetv1alpha1.DatabaseCluster) { d.Spec.Replicas = 1 })
	var placed map[string]*dbfleetv1alpha1.MemberDatabase
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "one share placed", func(context.Context) (bool, error) {
		placed = f.placedMemberDatabases("orders")
		return len(placed) == 1, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var left string
	for c, mdb := range placed {
		left = c
		f.reportAsAgent(mdb, 1, true)
	}
	err = framework.WaitFor(f.ctx, framework.DefaultTimeout, "the evicted share purged", func(context.Context) (bool, error) {
		return len(f.memberDatabases("orders")) == 1, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.waitCarried("orders", left)

	// The DatabaseCluster goes: so do the last copies. (The Secrets it owns go by garbage
	// collection, which this API server does not run.)
	if err := f.c.Delete(f.ctx, f.getDatabase("orders")); err != nil {
		t.Fatal(err)
	}
	f.waitCarried("orders")
	if got := f.secret(f.ns, "orders-app"); got.ResourceVersion != own.ResourceVersion {
		t.Error("the user's Secret was written when the database went")
	}
}

func TestCredentialsMalformedSecretReported(t *testing.T) {
	f := newFixture(t)
	startHubWithCredentials(t)
	a := f.member("a", "r1", 100)
	f.policy("spread", 0, map[string]string{"app": "ledger"}, divided())
	own := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "ledger-replication"},
		Data:       map[string][]byte{"username": []byte("repl")},
	}
	if err := f.c.Create(f.ctx, own); err != nil {
		t.Fatal(err)
	}
	f.database("ledger", 1, map[string]string{"app": "ledger"})
	dbc := f.waitDatabase("ledger", "CredentialsReady=False SecretMalformed", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, dbfleetv1alpha1.CredentialsReasonSecretMalformed)
	})
	if c := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionCredentialsReady); !strings.Contains(c.Message, "ledger-replication") || !strings.Contains(c.Message, `"password"`) {
		t.Errorf("condition message %q does not name the Secret and the key", c.Message)
	}
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "SecretMalformed Event", func(ctx context.Context) (bool, error) {
		events := &eventsv1.EventList{}
		if err := f.c.List(ctx, events, client.InNamespace(f.ns)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Regarding.Name == "ledger" && e.Reason == dbfleetv1alpha1.CredentialsReasonSecretMalformed &&
				strings.Contains(e.Note, "ledger-replication") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.secret(f.ns, "ledger-replication"); got.ResourceVersion != own.ResourceVersion {
		t.Error("the malformed Secret was written")
	}
	// The other two are still made and carried; the malformed one is not.
	f.waitMemberDatabases("ledger", map[string]int32{a: 1})
	err = framework.WaitFor(f.ctx, framework.DefaultTimeout, "superuser and app carried", func(ctx context.Context) (bool, error) {
		list := &corev1.SecretList{}
		if err := f.c.List(ctx, list, client.InNamespace(dbfleetv1alpha1.MemberNamespace(a)),
			client.MatchingLabels{dbfleetv1alpha1.LabelDatabase: "ledger"}); err != nil {
			return false, err
		}
		kinds := map[string]bool{}
		for _, s := range list.Items {
			kinds[s.Labels[dbfleetv1alpha1.LabelCredentials]] = true
		}
		if kinds["replication"] {
			return false, nil
		}
		return kinds["superuser"] && kinds["app"], nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCredentialsCopiesFollowSecretEdits edits the source Secrets on the hub once the database
// has settled (no DatabaseCluster or MemberDatabase event follows): the copies in the member
// namespaces follow each edit, and a copy edited by hand is put back.
func TestCredentialsCopiesFollowSecretEdits(t *testing.T) {
	f := newFixture(t)
	startHubWithCredentials(t)
	a := f.member("a", "r1", 100)
	f.policy("spread", 0, map[string]string{"app": "stock"}, divided())
	f.database("stock", 1, map[string]string{"app": "stock"})
	f.waitDatabase("stock", "CredentialsReady", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionCredentialsReady, metav1.ConditionTrue, dbfleetv1alpha1.CredentialsReasonReady)
	})
	f.waitMemberDatabases("stock", map[string]int32{a: 1})
	f.waitCarried("stock", a)

	waitCopy := func(kind string, want func(*corev1.Secret) bool, what string) {
		t.Helper()
		key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(a), Name: dbfleetv1alpha1.CarriedCredentialsSecretName(f.ns, "stock", kind)}
		err := framework.WaitFor(f.ctx, framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
			s := &corev1.Secret{}
			if err := f.c.Get(ctx, key, s); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return want(s), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// A rotation on the hub: the copy follows.
	su := f.secret(f.ns, "stock-superuser")
	su.Data["password"] = []byte("rotated-by-the-user")
	if err := f.c.Update(f.ctx, su); err != nil {
		t.Fatal(err)
	}
	waitCopy("superuser", func(s *corev1.Secret) bool { return string(s.Data["password"]) == "rotated-by-the-user" },
		"the superuser copy to carry the rotated password")

	// A copy edited in the member namespace is put back from the source.
	app := f.secret(f.ns, "stock-app")
	carried := f.secret(dbfleetv1alpha1.MemberNamespace(a), dbfleetv1alpha1.CarriedCredentialsSecretName(f.ns, "stock", "app"))
	carried.Data["password"] = []byte("tampered")
	if err := f.c.Update(f.ctx, carried); err != nil {
		t.Fatal(err)
	}
	waitCopy("app", func(s *corev1.Secret) bool { return bytes.Equal(s.Data["password"], app.Data["password"]) },
		"the edited app copy to be put back")
}
