package join

import (
	"encoding/base64"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/pkg/join"
	"github.com/dbfleet/dbfleet/test/framework"
)

func assertNoWildcards(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, role); err != nil {
		t.Fatal(err)
	}
	if len(role.Rules) == 0 {
		t.Fatalf("%s %s has no rules", obj.GetKind(), obj.GetName())
	}
	for _, rule := range role.Rules {
		for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs} {
			if slices.Contains(list, "*") {
				t.Errorf("%s %s grants a wildcard: %+v", obj.GetKind(), obj.GetName(), rule)
			}
		}
		// The agent writes a postgres database's credentials into the member, so it manages
		// Secrets; it must never be able to grant itself more (escalate, bind, impersonate).
		for _, verb := range []string{"escalate", "bind", "impersonate"} {
			if slices.Contains(rule.Verbs, verb) {
				t.Errorf("%s %s grants %s: %+v", obj.GetKind(), obj.GetName(), verb, rule)
			}
		}
	}
}

func checkDeployment(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d); err != nil {
		t.Fatal(err)
	}
	if d.Namespace != join.SystemNamespace || d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("Deployment %s/%s: replicas %v strategy %s, want dbfleet-system, 1, Recreate", d.Namespace, d.Name, d.Spec.Replicas, d.Spec.Strategy.Type)
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	wantArgs := []string{"--hub-kubeconfig=/etc/dbfleet/hub/kubeconfig", "--hub-kubeconfig-secret=dbfleet-system/dbfleet-agent-hub-kubeconfig", "--cluster-name=east", "--heartbeat-interval=2s", "--fence-after=9s"}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args %q, want %q", c.Args, wantArgs)
	}
	if c.Image != "registry.example.com/dbfleet/agent:v1" {
		t.Errorf("image %s", c.Image)
	}
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
		!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || pod.SecurityContext == nil ||
		pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("security context is not restricted: pod %+v container %+v", pod.SecurityContext, sc)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes: liveness %+v readiness %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 8080 || ports["probes"] != 8081 {
		t.Errorf("ports %v, want metrics 8080 and probes 8081", ports)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/dbfleet/hub" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("volume mounts %+v, want the hub kubeconfig read-only at /etc/dbfleet/hub", c.VolumeMounts)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != join.HubKubeconfigSecret {
		t.Errorf("volumes %+v, want Secret %s", pod.Volumes, join.HubKubeconfigSecret)
	}
	if pod.ServiceAccountName != join.AgentName {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
}

// memberClientAs is a client for the member API server impersonating user.
func memberClientAs(t *testing.T, member *framework.Environment, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(member.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clientcmdLoad parses the hub kubeconfig in the manifests' Secret.
func clientcmdLoad(j *joined) (*clientcmdapi.Config, error) {
	for _, obj := range j.manifests {
		if obj.GetKind() == "Secret" && obj.GetName() == join.HubKubeconfigSecret {
			encoded, _, _ := unstructured.NestedString(obj.Object, "data", join.KubeconfigKey)
			data, err := base64.StdEncoding.DecodeString(encoded)
			if err != nil {
				return nil, err
			}
			return clientcmd.Load(data)
		}
	}
	return clientcmd.Load(nil)
}
