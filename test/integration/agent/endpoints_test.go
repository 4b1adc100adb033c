package agent

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// The primary's share reports where other clusters reach it (PodIP: the pod that really runs as
// primary; LoadBalancer: the address of a LoadBalancer Service in front of it), and its primary
// keeps slots for the other clusters' standbys the hub names.
func TestPrimaryShareReportsItsEndpointsAndSlotsForOtherClusters(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary, func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.Standbys = []string{"orders-5", "orders-6"}
	})
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.runInstancePod(sts, 0, newInstanceServer(t, `{"pod":"orders-0","role":"primary","epoch":1,"timeline":1,"ready":true}`))
	s.runInstancePod(sts, 1, newInstanceServer(t, `{"pod":"orders-1","role":"standby","epoch":1,"timeline":1,"streaming":true,"ready":true}`))

	got := s.waitMDB("PodIP endpoints", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return m.Status.Endpoints != nil && m.Status.Endpoints.ReadWrite != ""
	})
	if e := got.Status.Endpoints; e.ReadWrite != "127.0.0.1:5432" || !slices.Equal(e.ReadOnly, []string{"127.0.0.1:5432"}) {
		t.Errorf("endpoints %+v, want the primary pod's IP and the standby's, port 5432", e)
	}
	s.eventually("primary keeps slots for local and remote standbys", func() bool {
		return s.podAnnotation("orders-0", contract.AnnotationStandbys) == "orders-1,orders-5,orders-6" &&
			s.podAnnotation("orders-1", contract.AnnotationPrimaryEndpoint) == "127.0.0.1:5432"
	})

	// LoadBalancer: the address is the Service's, once a cloud controller gives it one.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Network = dbfleetv1alpha1.DatabaseNetworkLoadBalancer })
	lb := &corev1.Service{}
	s.eventually("LoadBalancer Service", func() bool {
		return east.Client.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: specs.PrimaryLoadBalancerName(s.db)}, lb) == nil
	})
	if lb.Spec.Type != corev1.ServiceTypeLoadBalancer || lb.Spec.Selector[contract.LabelInstanceRole] != contract.InstanceRolePrimary {
		t.Errorf("Service %s is %s selecting %v, want a LoadBalancer in front of the instance that runs as primary", lb.Name, lb.Spec.Type, lb.Spec.Selector)
	}
	s.waitMDB("no read-write address before the LoadBalancer has one", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return m.Status.Endpoints != nil && m.Status.Endpoints.ReadWrite == ""
	})
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(lb), lb); err != nil {
			return err
		}
		lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.10"}}
		return east.Client.Status().Update(s.ctx, lb)
	}); err != nil {
		t.Fatal(err)
	}
	s.waitMDB("the LoadBalancer's address", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return m.Status.Endpoints != nil && m.Status.Endpoints.ReadWrite == "203.0.113.10:5432"
	})

	// Back to PodIP: the LoadBalancer goes.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Network = "" })
	s.eventually("LoadBalancer Service removed", func() bool {
		err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(lb), &corev1.Service{})
		return client.IgnoreNotFound(err) == nil && err != nil
	})

	// LoadBalancer again, then the share goes: so does its load balancer.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Network = dbfleetv1alpha1.DatabaseNetworkLoadBalancer })
	s.eventually("LoadBalancer Service again", func() bool {
		return east.Client.Get(s.ctx, client.ObjectKeyFromObject(lb), &corev1.Service{}) == nil
	})
	if err := hub.Client.Delete(s.ctx, s.mdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, hub.Client, s.mdb)
	if err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(lb), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("the LoadBalancer Service outlived its share: %v", err)
	}
}

// A share in another cluster than the primary's: its standbys follow the endpoint the hub wrote
// (spec.primaryEndpoint), which they could not learn in their own cluster.
func TestReplicaShareFollowsTheHubsPrimaryEndpoint(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 3, dbfleetv1alpha1.RoleReplica, func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.PrimaryEndpoint = "10.9.0.4:5432"
	})
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.createPods(sts, 3, 4)
	s.eventually("standbys annotated with the hub's endpoint", func() bool {
		return s.podAnnotation("orders-3", contract.AnnotationPrimaryEndpoint) == "10.9.0.4:5432" &&
			s.podAnnotation("orders-4", contract.AnnotationPrimaryEndpoint) == "10.9.0.4:5432"
	})
	// The primary moves to another address: they follow.
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.PrimaryEndpoint = "10.9.0.8:5432" })
	s.eventually("standbys re-pointed", func() bool {
		return s.podAnnotation("orders-3", contract.AnnotationPrimaryEndpoint) == "10.9.0.8:5432"
	})
}
