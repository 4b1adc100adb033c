package credentials

import (
	"crypto/rand"
	"fmt"
	"maps"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// passwordLength is long enough for 190 bits from an alphabet that needs no escaping in a URI
// or a libpq connection string.
const passwordLength = 32

const passwordAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomPassword draws from crypto/rand.
func randomPassword() (string, error) {
	return randomString(passwordLength)
}

func randomString(n int) (string, error) {
	// rand.Text would do, but its alphabet (base32) is smaller; reject bytes past the largest
	// multiple of the alphabet's size so that every character is equally likely.
	const limit = 256 - 256%len(passwordAlphabet)
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("read random bytes: %w", err)
		}
		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, passwordAlphabet[int(b)%len(passwordAlphabet)])
			}
		}
	}
	return string(out), nil
}

// defaultUsername and defaultDBName are what the hub puts in the Secrets it creates. The app
// user owns its database (as CloudNativePG's app user does); the replication user connects to
// the replication pseudo-database only, but libpq wants a dbname.
func defaultUsername(kind string) string {
	switch kind {
	case dbfleetv1alpha1.CredentialsSuperuser:
		return "postgres"
	case dbfleetv1alpha1.CredentialsReplication:
		return "streaming_replica"
	default:
		return "app"
	}
}

func defaultDBName(kind string) string {
	if kind == dbfleetv1alpha1.CredentialsApp {
		return "app"
	}
	return "postgres"
}

// requiredKeys are what a credentials Secret must hold, the user's too; uri is derived
// information, so a user's Secret may leave it out.
func requiredKeys(kind string) []string {
	keys := []string{contract.SecretKeyUsername, contract.SecretKeyPassword}
	if kind == dbfleetv1alpha1.CredentialsApp {
		keys = append(keys, contract.SecretKeyDBName)
	}
	return keys
}

// malformed says what is wrong with the first required key the Secret lacks or whose value the
// database would not take (contract.CredentialProblem), or "" when nothing is. It never quotes a
// value.
func malformed(secret *corev1.Secret, kind string) string {
	for _, key := range requiredKeys(kind) {
		value, ok := secret.Data[key]
		if !ok || len(value) == 0 {
			return fmt.Sprintf("Secret %s has no key %q", secret.Name, key)
		}
		if problem := contract.CredentialProblem(key, string(value)); problem != "" {
			return fmt.Sprintf("Secret %s key %q %s", secret.Name, key, problem)
		}
	}
	return ""
}

// connectionURI is a libpq URI to the database's read-write Service in the member cluster,
// which is where clients of that cluster reach the primary.
func connectionURI(database, username, password, dbname string) string {
	u := url.URL{
		Scheme: "postgresql",
		User:   url.UserPassword(username, password),
		Host:   database + "-rw:5432",
		Path:   "/" + dbname,
	}
	return u.String()
}

// newSecret is the Secret the hub creates for a DatabaseCluster that has none of this kind:
// owned by the DatabaseCluster (so it goes with it) and labelled, which is how the hub tells its
// own Secrets from a user's.
func newSecret(dbc *dbfleetv1alpha1.DatabaseCluster, kind string) (*corev1.Secret, error) {
	password, err := randomPassword()
	if err != nil {
		return nil, err
	}
	username, dbname := defaultUsername(kind), defaultDBName(kind)
	return ownedSecret(dbc, dbfleetv1alpha1.CredentialsSecretName(dbc.Name, kind), kind, corev1.SecretTypeOpaque, map[string][]byte{
		contract.SecretKeyUsername: []byte(username),
		contract.SecretKeyPassword: []byte(password),
		contract.SecretKeyDBName:   []byte(dbname),
		contract.SecretKeyURI:      []byte(connectionURI(dbc.Name, username, password, dbname)),
	}), nil
}

// carriedSecret is the copy of a credentials Secret in a member namespace, owned by the share's
// MemberDatabase so that it goes with it. Only the data travels, with a login's dbname and uri
// filled in when the user's Secret left them out, and the app's with the CA clients verify the
// servers by (caCert).
func carriedSecret(dbc *dbfleetv1alpha1.DatabaseCluster, kind string, source *corev1.Secret, caCert []byte, mdb *dbfleetv1alpha1.MemberDatabase) *corev1.Secret {
	data := maps.Clone(source.Data)
	if kind == dbfleetv1alpha1.CredentialsApp && len(caCert) > 0 {
		data[contract.SecretKeyCACert] = caCert
	}
	if kind != dbfleetv1alpha1.CredentialsTLS {
		if len(data[contract.SecretKeyDBName]) == 0 {
			data[contract.SecretKeyDBName] = []byte(defaultDBName(kind))
		}
		if len(data[contract.SecretKeyURI]) == 0 {
			data[contract.SecretKeyURI] = []byte(connectionURI(dbc.Name,
				string(data[contract.SecretKeyUsername]), string(data[contract.SecretKeyPassword]),
				string(data[contract.SecretKeyDBName])))
		}
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: mdb.Namespace,
			Name:      dbfleetv1alpha1.CarriedCredentialsSecretName(dbc.Namespace, dbc.Name, kind),
			Labels: map[string]string{
				dbfleetv1alpha1.LabelDatabase:          dbc.Name,
				dbfleetv1alpha1.LabelDatabaseNamespace: dbc.Namespace,
				dbfleetv1alpha1.LabelCluster:           mdb.Labels[dbfleetv1alpha1.LabelCluster],
				dbfleetv1alpha1.LabelCredentials:       kind,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: dbfleetv1alpha1.GroupVersion.String(),
				Kind:       "MemberDatabase",
				Name:       mdb.Name,
				UID:        mdb.UID,
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}
