package join

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/hub/push"
)

func TestMemberManifestsRender(t *testing.T) {
	objs := MemberManifests(AgentSettings{Cluster: "east", Image: "img:1", HeartbeatInterval: "5s", FenceAfter: "15s"}, []byte("kubeconfig"))
	data, err := RenderYAML("# header\n", objs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("# header\n---\n")) {
		t.Errorf("output does not start with the header:\n%s", data)
	}
	if bytes.Contains(data, []byte("creationTimestamp")) || bytes.Contains(data, []byte("status:")) {
		t.Errorf("output carries creationTimestamp or status:\n%s", data)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var kinds []string
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if m == nil {
			continue
		}
		kinds = append(kinds, m["kind"].(string))
		if m["apiVersion"] == nil {
			t.Errorf("%s has no apiVersion", m["kind"])
		}
	}
	want := []string{"Namespace", "Secret", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
}

// TestRulesAreExact pins every rule: a change to what the agent may do must change this test.
func TestRulesAreExact(t *testing.T) {
	noWildcards := func(t *testing.T, rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			for _, l := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
				if slices.Contains(l, "*") {
					t.Errorf("wildcard in %+v", r)
				}
			}
		}
	}
	describe := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rules {
			out = append(out, strings.Join(r.APIGroups, ",")+" "+strings.Join(r.Resources, ",")+" ["+strings.Join(r.ResourceNames, ",")+"] "+strings.Join(r.Verbs, ","))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		rules []rbacv1.PolicyRule
		want  []string
	}{
		{"hub Role", AgentRoleRules("east"), []string{
			"dbfleet.io memberdatabases [] get,list,watch,update,patch",
			"dbfleet.io memberdatabases/status [] get,update,patch",
			" secrets [] get,list,watch",
			"coordination.k8s.io leases [dbfleet-agent] get,update",
			"coordination.k8s.io leases [] create",
			"dbfleet.io memberclusterreports [east] get,update,patch",
			"dbfleet.io memberclusterreports [] create",
			",events.k8s.io events [] create,patch",
			" serviceaccounts/token [dbfleet-agent] create",
		}},
		{"member ClusterRole", AgentMemberRules(), []string{
			"apps statefulsets [] get,list,watch,create,update,patch,delete",
			" services [] get,list,watch,create,update,patch,delete",
			"multicluster.x-k8s.io serviceexports [] get,list,watch,create,update,patch,delete",
			" secrets,serviceaccounts [] get,list,watch,create,update,patch,delete",
			"rbac.authorization.k8s.io roles,rolebindings [] get,list,watch,create,update,patch,delete",
			"policy poddisruptionbudgets [] get,list,watch,create,update,patch,delete",
			" pods [] get,list,watch,patch",
			" nodes [] get,list,watch",
			" namespaces [] get,list,watch,create",
			" persistentvolumeclaims [] get,list,watch,patch,delete",
			"storage.k8s.io storageclasses [] get,list,watch",
			"coordination.k8s.io leases [] get,list,watch,create,update,patch,delete",
			",events.k8s.io events [] create,patch",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			noWildcards(t, tc.rules)
			if got := describe(tc.rules); !slices.Equal(got, tc.want) {
				t.Errorf("rules\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func TestHubObjectsAreLabelled(t *testing.T) {
	o := NewOptions("east")
	o.Region, o.Zone, o.Labels = "r", "z", map[string]string{"tier": "gold"}
	mc := memberCluster(&o, nil)
	if mc.Labels["tier"] != "gold" {
		t.Errorf("MemberCluster labels %v lack the user's", mc.Labels)
	}
	for _, obj := range []interface{ GetLabels() map[string]string }{
		mc, memberNamespace("east"), agentServiceAccount("east"), agentRole("east"), agentRoleBinding("east"),
		pushSecret("east", nil),
	} {
		l := obj.GetLabels()
		if l["dbfleet.io/cluster"] != "east" || l[LabelManagedBy] != ManagedByJoin {
			t.Errorf("%T labels %v", obj, l)
		}
	}
	if s := pushSecret("east", nil); s.Labels[push.SecretLabel] != "true" || s.Name != "east" || s.Namespace != hub.Namespace {
		t.Errorf("push Secret %s/%s labels %v", s.Namespace, s.Name, s.Labels)
	}
}
