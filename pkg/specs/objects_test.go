package specs

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Every object a share's builders make is among ShareObjects, so the agent removes it with the
// share: a builder added without its name there fails here.
func TestShareObjectsNameEveryObjectBuilt(t *testing.T) {
	mdb := &dbfleetv1alpha1.MemberDatabase{Spec: dbfleetv1alpha1.MemberDatabaseSpec{
		DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: "orders"},
		Database:    dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres},
		Replicas:    2, Role: dbfleetv1alpha1.RolePrimary, Epoch: 1}}
	var carried []corev1.Secret
	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		carried = append(carried, corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: dbfleetv1alpha1.CarriedCredentialsSecretName("shop", "orders", kind)}})
	}
	built := []Object{StatefulSet(mdb, 0), HeadlessService(mdb), PrimaryLoadBalancer(mdb)}
	for _, pdb := range PDBs(mdb) {
		built = append(built, pdb)
	}
	for _, svc := range RoleServices(mdb, true) {
		built = append(built, svc)
	}
	sa, role, binding := InstanceRBAC(mdb)
	built = append(built, sa, role, binding)
	secrets := Credentials(mdb, carried)
	if len(secrets) != len(dbfleetv1alpha1.CredentialKinds) {
		t.Fatalf("%d credentials Secrets built, want %d", len(secrets), len(dbfleetv1alpha1.CredentialKinds))
	}
	for _, s := range secrets {
		built = append(built, s)
	}

	key := func(o Object) string { return fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName()) }
	named := map[string]bool{}
	for _, o := range ShareObjects("shop", "orders") {
		named[key(o)] = true
	}
	for _, o := range built {
		if !named[key(o)] {
			t.Errorf("%s is built but not among ShareObjects: it would outlive its share", key(o))
		}
	}
	if len(named) != len(built) {
		t.Errorf("ShareObjects names %d objects, the builders make %d", len(named), len(built))
	}
}
