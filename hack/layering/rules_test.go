package main

import (
	"strings"
	"testing"
)

// Each rule catches a dependency that runs back up, directly or through another package, and
// leaves the allowed ones alone.
func TestViolations(t *testing.T) {
	m := func(p string) string { return module + p }
	clean := []pkg{
		{ImportPath: m("pkg/contract"), Deps: []string{"fmt", "strconv", "time"}},
		{ImportPath: m("pkg/placement"), Deps: []string{m("api/v1alpha1"), "sigs.k8s.io/controller-runtime/pkg/scheme"}},
		{ImportPath: m("pkg/instance/observe"), Deps: []string{m("pkg/contract"), m("pkg/instance/decide"), "k8s.io/client-go/kubernetes"}},
		{ImportPath: m("pkg/specs"), Deps: []string{m("api/v1alpha1"), m("pkg/contract"), "k8s.io/api/apps/v1", "sigs.k8s.io/controller-runtime/pkg/scheme"}},
		{ImportPath: m("pkg/agent/member"), Deps: []string{m("pkg/contract"), m("pkg/specs"), m("pkg/agent/fence"), m("pkg/agentry")}},
		{ImportPath: m("pkg/hub/push"), Deps: []string{m("pkg/agent/member")}},
		{ImportPath: m("cmd/agent/app"), Deps: []string{m("pkg/agent"), m("pkg/contract"), m("pkg/instancex")}},
		{ImportPath: m("cmd/instance"), Deps: []string{m("pkg/instance")}},
	}
	if v := violations(clean); len(v) > 0 {
		t.Errorf("allowed dependencies refused:\n%s", strings.Join(v, "\n"))
	}
	for _, tc := range []struct {
		name string
		p    pkg
		want string
	}{
		{"the contract on a client", pkg{m("pkg/contract"), []string{"fmt", "k8s.io/apimachinery/pkg/types"}}, "pkg/contract depends on k8s.io/apimachinery/pkg/types"},
		{"the contract on the API", pkg{m("pkg/contract"), []string{m("api/v1alpha1")}}, "pkg/contract depends on " + m("api/v1alpha1")},
		{"placement on client-go", pkg{m("pkg/placement"), []string{"k8s.io/client-go/rest"}}, "pkg/placement depends on k8s.io/client-go/rest"},
		{"placement on a controller-runtime client", pkg{m("pkg/placement/sub"), []string{"sigs.k8s.io/controller-runtime/pkg/client/apiutil"}}, "pkg/placement/sub depends on"},
		{"the builders on a controller-runtime client", pkg{m("pkg/specs"), []string{"sigs.k8s.io/controller-runtime/pkg/client"}}, "pkg/specs depends on sigs.k8s.io/controller-runtime/pkg/client"},
		{"the builders on client-go", pkg{m("pkg/specs"), []string{"k8s.io/client-go/kubernetes"}}, "pkg/specs depends on k8s.io/client-go/kubernetes"},
		{"the builders on the agent", pkg{m("pkg/specs"), []string{m("pkg/agent/member")}}, "pkg/specs depends on " + m("pkg/agent/member")},
		{"the builders on the hub", pkg{m("pkg/specs"), []string{m("pkg/hub/push")}}, "pkg/specs depends on " + m("pkg/hub/push")},
		{"the instance on the agent", pkg{m("pkg/instance/observe"), []string{m("pkg/agent/fence")}}, "pkg/instance/observe depends on " + m("pkg/agent/fence")},
		{"the instance on the hub", pkg{m("pkg/instance"), []string{m("pkg/hub")}}, "pkg/instance depends on " + m("pkg/hub")},
		{"the agent on the hub", pkg{m("pkg/agent/member"), []string{m("pkg/hub/databasecluster")}}, "pkg/agent/member depends on"},
		{"the agent binary on the instance manager", pkg{m("cmd/agent"), []string{m("pkg/instance/decide")}}, "cmd/agent depends on " + m("pkg/instance/decide")},
	} {
		v := violations([]pkg{tc.p})
		if len(v) != 1 || !strings.HasPrefix(v[0], tc.want) {
			t.Errorf("%s: %q, want one violation starting %q", tc.name, v, tc.want)
		}
	}
}
