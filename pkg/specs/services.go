package specs

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// HeadlessService is the headless Service giving each pod a stable DNS name.
func HeadlessService(mdb *dbfleetv1alpha1.MemberDatabase) *corev1.Service {
	port := engines[mdb.Spec.Database.Engine].port
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: mdb.Spec.DatabaseRef.Namespace,
			Name:      mdb.Spec.DatabaseRef.Name,
			Labels:    ObjectLabels(mdb),
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 SelectorLabels(mdb),
			PublishNotReadyAddresses: true, // replicas must find each other before they are ready
			Ports:                    []corev1.ServicePort{{Name: "db", Port: port, TargetPort: intstr.FromString("db")}},
		},
	}
}

// ReadWriteServiceName and ReadOnlyServiceName name a postgres database's client Services in a
// member cluster: "<db>-rw" (the primary) and "<db>-ro" (the standbys).
func ReadWriteServiceName(db string) string { return db + "-rw" }
func ReadOnlyServiceName(db string) string  { return db + "-ro" }

// RoleServices are a postgres share's client Services. Without the instance manager
// (instanceManaged false) they select on the placement's role label alone, as the pods run
// nothing that could say otherwise; with it, also on the role the instance reports it really
// runs, so that <db>-rw never sends a write to a pod that is not a writable primary.
func RoleServices(mdb *dbfleetv1alpha1.MemberDatabase, instanceManaged bool) []*corev1.Service {
	port := engines[mdb.Spec.Database.Engine].port
	svc := func(name, role, instanceRole string) *corev1.Service {
		sel := SelectorLabels(mdb)
		sel[contract.LabelRole] = role
		if instanceManaged {
			sel[contract.LabelInstanceRole] = instanceRole
		}
		return &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: mdb.Spec.DatabaseRef.Namespace, Name: name, Labels: ObjectLabels(mdb)},
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: sel,
				Ports:    []corev1.ServicePort{{Name: "db", Port: port, TargetPort: intstr.FromString("db")}},
			},
		}
	}
	db := mdb.Spec.DatabaseRef.Name
	return []*corev1.Service{
		svc(ReadWriteServiceName(db), contract.PodRolePrimary, contract.InstanceRolePrimary),
		svc(ReadOnlyServiceName(db), contract.PodRoleReplica, contract.InstanceRoleStandby),
	}
}

// PrimaryLoadBalancerName names the LoadBalancer Service in front of a share's primary in the
// LoadBalancer network mode: "<db>-primary".
func PrimaryLoadBalancerName(db string) string { return db + "-primary" }

// PrimaryLoadBalancer is the LoadBalancer Service in front of the share's primary: it selects
// what <db>-rw selects, the pod whose instance really runs as primary.
func PrimaryLoadBalancer(mdb *dbfleetv1alpha1.MemberDatabase) *corev1.Service {
	rw := RoleServices(mdb, true)[0]
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: rw.Namespace, Name: PrimaryLoadBalancerName(mdb.Spec.DatabaseRef.Name), Labels: ObjectLabels(mdb)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: rw.Spec.Selector,
			Ports:    []corev1.ServicePort{{Name: "db", Port: rw.Spec.Ports[0].Port, TargetPort: intstr.FromString("db")}},
		},
	}
}
