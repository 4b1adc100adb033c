package main

import (
	"fmt"
	"sort"
	"strings"
)

// module is the path every package of this repository starts with.
const module = "github.com/dbfleet/dbfleet/"

// rule forbids the packages under from (a path relative to the module, or a whole import path)
// to depend on any package under one of forbidden. stdlibOnly forbids everything outside the
// standard library.
type rule struct {
	from       string
	forbidden  []string
	stdlibOnly bool
	why        string
}

// rules are the floors of the house, lowest first.
var rules = []rule{
	{from: "pkg/contract", stdlibOnly: true,
		why: "the hub, the agent and the instance manager all import the contract: it must bring none of their code, nor a client, into the others' binaries"},
	{from: "pkg/placement", forbidden: []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime/pkg/client", "sigs.k8s.io/multicluster-runtime"},
		why: "the placement core is pure: it decides from its inputs and talks to no API server"},
	{from: "pkg/specs", forbidden: []string{"pkg/agent", "pkg/hub", "k8s.io/client-go", "sigs.k8s.io/controller-runtime/pkg/client"},
		why: "the object builders are pure: the agent (and the hub's Push mode, through the same reconciler) applies what they return; they read no API server and know no controller"},
	{from: "pkg/instance", forbidden: []string{"pkg/agent", "pkg/hub"},
		why: "the instance manager runs in every database pod and shares with the agent only pkg/contract"},
	{from: "pkg/agent", forbidden: []string{"pkg/hub"},
		why: "the agent runs in member clusters; what it shares with the hub lives in api/ and pkg/contract"},
	{from: "cmd/agent", forbidden: []string{"pkg/instance"},
		why: "the agent binary carries no instance manager (its image carries dbfleet-instance as a separate binary)"},
}

// pkg is one package as `go list` describes it.
type pkg struct {
	ImportPath string
	Deps       []string
}

// under says whether the import path p is the package prefix or one below it; prefix is relative
// to the module unless it names another module's path (it holds a dot in its first element).
func under(p, prefix string) bool {
	if first, _, _ := strings.Cut(prefix, "/"); !strings.Contains(first, ".") {
		prefix = module + prefix
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

// standard says whether an import path is in the standard library (no dot in its first element).
func standard(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".")
}

// violations lists every dependency that breaks a rule, one line each, sorted.
func violations(pkgs []pkg) []string {
	var out []string
	for _, r := range rules {
		for _, p := range pkgs {
			if !under(p.ImportPath, r.from) {
				continue
			}
			for _, d := range p.Deps {
				bad := r.stdlibOnly && !standard(d)
				for _, f := range r.forbidden {
					bad = bad || under(d, f)
				}
				if bad {
					out = append(out, fmt.Sprintf("%s depends on %s: %s", strings.TrimPrefix(p.ImportPath, module), d, r.why))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}
