package agent

import (
	"context"
	"maps"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/agent/member"
	"github.com/dbfleet/dbfleet/test/framework"
)

// carry writes the credentials copies the hub's credentials controller leaves in member-<cluster>.
func (s *share) carry() map[string]map[string][]byte {
	s.t.Helper()
	data := map[string]map[string][]byte{}
	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		d := map[string][]byte{"username": []byte("u-" + kind), "password": []byte("p-" + kind), "dbname": []byte("app"), "uri": []byte("postgresql://x")}
		data[kind] = d
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: dbfleetv1alpha1.MemberNamespace(clusterName),
				Name:      dbfleetv1alpha1.CarriedCredentialsSecretName(s.ns, s.db, kind),
				Labels: map[string]string{dbfleetv1alpha1.LabelDatabase: s.db, dbfleetv1alpha1.LabelDatabaseNamespace: s.ns,
					dbfleetv1alpha1.LabelCluster: clusterName, dbfleetv1alpha1.LabelCredentials: kind},
			},
			Data: d,
		}
		if err := hub.Client.Create(s.ctx, secret); err != nil {
			s.t.Fatal(err)
		}
	}
	return data
}

func (s *share) waitObject(obj client.Object) {
	s.t.Helper()
	err := framework.WaitFor(s.ctx, framework.DefaultTimeout, "member "+obj.GetName(), func(ctx context.Context) (bool, error) {
		err := east.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

func TestPostgresShareGetsCredentialsServicesAndInstanceRole(t *testing.T) {
	// The agent runs with exactly the member permissions join grants it: creating the instance
	// Role needs the agent to hold what the Role grants.
	startAgentWithImage(t, hub.Config, agentMemberConfig(t, "agent-postgres", nil), nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	carried := s.carry()

	for _, kind := range dbfleetv1alpha1.CredentialKinds {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-" + kind}}
		s.waitObject(secret)
		if !maps.EqualFunc(secret.Data, carried[kind], func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("Secret %s holds %v, want the carried %v", secret.Name, secret.Data, carried[kind])
		}
		if secret.Labels[member.LabelManagedBy] != member.ManagedByAgent || secret.Labels[dbfleetv1alpha1.LabelCredentials] != kind {
			t.Errorf("Secret %s labels %v", secret.Name, secret.Labels)
		}
	}

	base := map[string]string{dbfleetv1alpha1.LabelDatabase: s.db, member.LabelInstance: s.db}
	for name, want := range map[string]map[string]string{
		s.db + "-rw": {dbfleetv1alpha1.LabelRole: "primary", dbfleetv1alpha1.LabelInstanceRole: "primary"},
		s.db + "-ro": {dbfleetv1alpha1.LabelRole: "replica", dbfleetv1alpha1.LabelInstanceRole: "standby"},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}
		s.waitObject(svc)
		maps.Copy(want, base)
		if !maps.Equal(svc.Spec.Selector, want) {
			t.Errorf("Service %s selects %v, want %v", name, svc.Spec.Selector, want)
		}
		if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.Ports[0].Port != 5432 {
			t.Errorf("Service %s is %+v, want a ClusterIP Service on 5432", name, svc.Spec)
		}
	}
	headless := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db}}
	s.waitObject(headless)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !maps.Equal(headless.Spec.Selector, base) {
		t.Errorf("Service %s is %+v, want headless over every pod", s.db, headless.Spec)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-instance"}}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-instance"}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-instance"}}
	for _, obj := range []client.Object{sa, role, binding} {
		s.waitObject(obj)
	}
	if len(binding.Subjects) != 1 || binding.Subjects[0].Name != sa.Name || binding.RoleRef.Name != role.Name {
		t.Errorf("RoleBinding %+v does not bind the Role to the ServiceAccount", binding)
	}

	// What the instance may do, asked of the API server as the instance's ServiceAccount.
	cfg, err := east.UserConfig("system:serviceaccount:"+s.ns+":"+sa.Name, "system:serviceaccounts")
	if err != nil {
		t.Fatal(err)
	}
	instance, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.RenewPrimaryLease(s.ctx, east.Client, s.ns, s.db, fence.Holder(clusterName, 1), time.Now(), 15*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "other"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x")}}
	if err := east.Client.Create(s.ctx, other); err != nil {
		t.Fatal(err)
	}
	lease := &coordinationv1.Lease{}
	if err := instance.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: fence.PrimaryLeaseName(s.db)}, lease); err != nil {
		t.Errorf("the instance cannot read its primary Lease: %v", err)
	}
	if err := instance.List(s.ctx, &corev1.PodList{}, client.InNamespace(s.ns)); err != nil {
		t.Errorf("the instance cannot list its namespace's pods: %v", err)
	}
	for what, err := range map[string]error{
		"read another Lease":         instance.Get(s.ctx, client.ObjectKeyFromObject(other), &coordinationv1.Lease{}),
		"update its primary Lease":   instance.Update(s.ctx, lease),
		"read a Secret":              instance.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: s.db + "-superuser"}, &corev1.Secret{}),
		"list pods of another place": instance.List(s.ctx, &corev1.PodList{}, client.InNamespace("default")),
		"delete a pod":               instance.Delete(s.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-0"}}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the instance should be forbidden to %s; got %v", what, err)
		}
	}

	// The share goes: so does all of it.
	if err := hub.Client.Delete(s.ctx, s.mdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, hub.Client, s.mdb)
	for _, obj := range []client.Object{
		sa, role, binding,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-rw"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-ro"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-app"}},
	} {
		if err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s still there after the share was removed (%v)", obj, obj.GetName(), err)
		}
	}
}

func TestPostgresServicesWithoutInstanceManagerSelectOnRoleAlone(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	rw := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-rw"}}
	s.waitObject(rw)
	want := map[string]string{dbfleetv1alpha1.LabelDatabase: s.db, member.LabelInstance: s.db, dbfleetv1alpha1.LabelRole: "primary"}
	if !maps.Equal(rw.Spec.Selector, want) {
		t.Errorf("Service %s selects %v, want %v", rw.Name, rw.Spec.Selector, want)
	}
}
