package specs

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// Object is a Kubernetes object with its metadata: what controller-runtime's client.Object is,
// which this package does not import.
type Object interface {
	metav1.Object
	runtime.Object
}

// ShareObjects are the objects the builders make for the share of database db in namespace ns,
// named but empty, for the agent to delete when the share goes: the StatefulSet, the headless
// Service, the PodDisruptionBudgets and what a postgres share adds (its client Services, its
// primary's LoadBalancer, its instance managers' RBAC and its credentials).
func ShareObjects(ns, db string) []Object {
	name := InstanceServiceAccountName(db)
	objs := []Object{
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: db}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: db}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PrimaryPDBName(db)}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReplicaPDBName(db)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReadWriteServiceName(db)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReadOnlyServiceName(db)}},
		// LoadBalancer network mode: a load balancer left behind would go on costing.
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: PrimaryLoadBalancerName(db)}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
	}
	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		objs = append(objs, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dbfleetv1alpha1.CredentialsSecretName(db, kind)}})
	}
	return objs
}
