package specs

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Credentials are the member-side Secrets "<db>-<kind>" made from the copies the hub carried
// into member-<cluster> (carried, as the agent read them there), by kind.
func Credentials(mdb *dbfleetv1alpha1.MemberDatabase, carried []corev1.Secret) []*corev1.Secret {
	var out []*corev1.Secret
	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		want := dbfleetv1alpha1.CarriedCredentialsSecretName(mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name, kind)
		for i := range carried {
			c := &carried[i]
			if c.Name != want {
				continue
			}
			labels := ObjectLabels(mdb)
			labels[dbfleetv1alpha1.LabelCredentials] = kind
			out = append(out, &corev1.Secret{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
				ObjectMeta: metav1.ObjectMeta{
					Namespace: mdb.Spec.DatabaseRef.Namespace,
					Name:      dbfleetv1alpha1.CredentialsSecretName(mdb.Spec.DatabaseRef.Name, kind),
					Labels:    labels,
				},
				Type: corev1.SecretTypeOpaque,
				Data: maps.Clone(c.Data),
			})
		}
	}
	return out
}
