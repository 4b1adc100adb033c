package specs

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// InstanceServiceAccountName names the ServiceAccount, Role and RoleBinding of a postgres
// database's instance managers: "<db>-instance".
func InstanceServiceAccountName(db string) string { return db + "-instance" }

// InstanceRBAC is what a postgres database's instance managers may do in their member cluster:
// get and watch the share's pods by name (each reads its own Pod, for its role label and
// annotations; the StatefulSet names them <db>-<ordinal>, so the names are known before the pods
// exist) and the database's primary Lease. The watch is by name too (a metadata.name field
// selector, which RBAC authorises against resourceNames): no list, nothing else, nothing to write.
func InstanceRBAC(mdb *dbfleetv1alpha1.MemberDatabase) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	ns, db := mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name
	name := InstanceServiceAccountName(db)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: ObjectLabels(mdb)}
	}
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta()}
	if t := mdb.Spec.Database.ServiceAccountTemplate; t != nil {
		sa.Annotations = maps.Clone(t.Metadata.Annotations)
		labels := maps.Clone(t.Metadata.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, sa.Labels) // ours win over the user's
		sa.Labels = labels
	}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta(),
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
				ResourceNames: []string{contract.PrimaryLeaseName(db)}, Verbs: []string{"get", "watch"}},
		},
	}
	// Empty resourceNames would mean every pod: a drained share gets no pod rule at all.
	if pods := sharePodNames(mdb); len(pods) > 0 {
		role.Rules = append(role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: pods, Verbs: []string{"get", "watch"}})
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	return sa, role, binding
}
