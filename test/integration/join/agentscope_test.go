package join

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

// ours are the labels the agent puts on what it creates (pkg/specs.ObjectLabels).
func ours() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "dbfleet-agent", "dbfleet.io/database": "orders", "app.kubernetes.io/instance": "orders"}
}

func objMeta(ns, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
}

// statefulSet is a share's StatefulSet as the agent writes it, changed by change.
func statefulSet(ns string, change func(*corev1.PodSpec)) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{
		ObjectMeta: objMeta(ns, "orders", ours()),
		Spec: appsv1.StatefulSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"dbfleet.io/database": "orders"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: ours()},
				Spec: corev1.PodSpec{ServiceAccountName: "orders-instance",
					Containers: []corev1.Container{{Name: "postgres", Image: "postgres:15"}}},
			},
		},
	}
	if change != nil {
		change(&sts.Spec.Template.Spec)
	}
	return sts
}

// refusedByPolicy: the write is refused by the agent's admission policy (not by RBAC).
func refusedByPolicy(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'dbfleet-agent'") {
		t.Errorf("the agent's admission policy should refuse to %s; got %v", what, err)
	}
}

// checkAgentScope runs what the agent may and may not write in a member that has hub join's
// manifests applied (asAgent impersonates its ServiceAccount). RBAC lets it write its kinds in
// every namespace; the admission policy keeps the writes to its own objects in database
// namespaces.
func checkAgentScope(ctx context.Context, t *testing.T, member *framework.Environment, asAgent client.Client) {
	t.Helper()
	// The API server loads a new policy asynchronously: wait until it is in force.
	err := framework.WaitFor(ctx, framework.DefaultTimeout, "the agent's admission policy in force", func(ctx context.Context) (bool, error) {
		err := asAgent.Create(ctx, &corev1.Secret{ObjectMeta: objMeta("kube-system", "probe", ours())}, client.DryRunAll)
		return apierrors.IsForbidden(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}

	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := member.Client.Get(ctx, client.ObjectKey{Name: "dbfleet-agent"}, policy); err != nil {
		t.Fatal(err)
	}
	if tc := policy.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
		t.Errorf("the API server's type check warns of the policy's CEL: %+v", tc.ExpressionWarnings)
	}

	// What a share needs.
	allowed(t, "create a database's namespace", asAgent.Create(ctx, &corev1.Namespace{ObjectMeta: objMeta("", "shop", ours())}))
	allowed(t, "list StatefulSets", asAgent.List(ctx, &appsv1.StatefulSetList{}, client.InNamespace("shop")))
	allowed(t, "create its primary Lease", asAgent.Create(ctx, &coordinationv1.Lease{ObjectMeta: objMeta("shop", "dbfleet-primary-orders", ours())}))
	allowed(t, "write a database's credentials", asAgent.Create(ctx, &corev1.Secret{ObjectMeta: objMeta("shop", "orders-app", ours())}))
	allowed(t, "create the instances' ServiceAccount", asAgent.Create(ctx, &corev1.ServiceAccount{ObjectMeta: objMeta("shop", "orders-instance", ours())}))
	allowed(t, "create the instances' Role", asAgent.Create(ctx, &rbacv1.Role{ObjectMeta: objMeta("shop", "orders-instance", ours()),
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"orders-0"}, Verbs: []string{"get", "watch"}}}}))
	allowed(t, "bind the instances' Role", asAgent.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: objMeta("shop", "orders-instance", ours()),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "orders-instance"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "shop", Name: "orders-instance"}}}))
	allowed(t, "create a share's StatefulSet", asAgent.Create(ctx, statefulSet("shop", nil)))
	allowed(t, "delete its own Secret", asAgent.Delete(ctx, &corev1.Secret{ObjectMeta: objMeta("shop", "orders-app", nil)}))

	// Someone else's objects in the same namespace.
	foreign := &corev1.Secret{ObjectMeta: objMeta("shop", "payroll", nil), StringData: map[string]string{"k": "v"}}
	if err := member.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	refusedByPolicy(t, "create a Secret without its label", asAgent.Create(ctx, &corev1.Secret{ObjectMeta: objMeta("shop", "loot", nil)}))
	claimed := foreign.DeepCopy()
	claimed.Labels = ours()
	refusedByPolicy(t, "take over someone's Secret by labelling it", asAgent.Update(ctx, claimed))
	refusedByPolicy(t, "delete someone's Secret", asAgent.Delete(ctx, foreign))

	// System namespaces, even with its label.
	for _, ns := range []string{"kube-system", "default", "dbfleet-system"} {
		refusedByPolicy(t, "write a Secret in "+ns, asAgent.Create(ctx, &corev1.Secret{ObjectMeta: objMeta(ns, "orders-app", ours())}))
		refusedByPolicy(t, "create a StatefulSet in "+ns, asAgent.Create(ctx, statefulSet(ns, nil)))
	}
	refusedByPolicy(t, "create namespace kube-mine", asAgent.Create(ctx, &corev1.Namespace{ObjectMeta: objMeta("", "kube-mine", ours())}))

	// Escalation inside a database namespace.
	refusedByPolicy(t, "bind a Role to another namespace's ServiceAccount", asAgent.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: objMeta("shop", "across", ours()),
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "orders-instance"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: "default"}}}))
	refusedByPolicy(t, "make a Role that reads Secrets", asAgent.Create(ctx, &rbacv1.Role{ObjectMeta: objMeta("shop", "reader", ours()),
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list"}}}}))
	for what, change := range map[string]func(*corev1.PodSpec){
		"on the host's network":       func(s *corev1.PodSpec) { s.HostNetwork = true },
		"in the host's PID namespace": func(s *corev1.PodSpec) { s.HostPID = true },
		"with the host's file system": func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		},
		"privileged": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		},
		"with an added capability": func(s *corev1.PodSpec) {
			s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
		},
		"with a privileged init": func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "i", Image: "i", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
		},
		"as another ServiceAccount": func(s *corev1.PodSpec) { s.ServiceAccountName = "deployer" },
	} {
		sts := statefulSet("shop", change)
		sts.Name = "bad"
		refusedByPolicy(t, "run pods "+what, asAgent.Create(ctx, sts))
	}
	refusedByPolicy(t, "set externalIPs on a Service", asAgent.Create(ctx, &corev1.Service{ObjectMeta: objMeta("shop", "orders-rw", ours()),
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}, ExternalIPs: []string{"10.0.0.9"}}}))

	// Its own kubeconfig Secret, where it saves its renewed hub token: updated, never deleted;
	// no other Secret of dbfleet-system.
	own := &corev1.Secret{}
	if err := member.Client.Get(ctx, client.ObjectKey{Namespace: join.SystemNamespace, Name: join.HubKubeconfigSecret}, own); err != nil {
		t.Fatal(err)
	}
	own.Data[join.KubeconfigKey] = append(own.Data[join.KubeconfigKey], '\n')
	allowed(t, "save a renewed hub token into its kubeconfig Secret", asAgent.Update(ctx, own))
	refusedByPolicy(t, "delete its kubeconfig Secret", asAgent.Delete(ctx, own))
	other := &corev1.Secret{ObjectMeta: objMeta(join.SystemNamespace, "dbfleet-other", ours()), StringData: map[string]string{"k": "v"}}
	if err := member.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	other.StringData = map[string]string{"k": "w"}
	refusedByPolicy(t, "update another Secret of "+join.SystemNamespace, asAgent.Update(ctx, other))
}
