// Command crdbounds adds maxItems bounds to the parts of the generated CRDs that come from
// Karmada's Placement type and from metav1.LabelSelector. Those Go types carry no list bounds, and
// without bounds the API server estimates the cost of our CEL rules over those lists as too high
// and refuses the CRD.
// It runs after controller-gen (make manifests) and edits deploy/crds in place.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// placementBounds are the list limits of spec.placement, by path below it ("[]" steps into items).
// They are far above what a real policy needs, and low enough for the CEL cost budget.
var placementBounds = map[string]int64{
	"clusterAffinity.clusterNames":                                                      1000,
	"clusterAffinity.exclude":                                                           1000,
	"clusterAffinity.fieldSelector.matchExpressions":                                    16,
	"clusterAffinity.fieldSelector.matchExpressions.[].values":                          64,
	"clusterAffinities":                                                                 8,
	"clusterAffinities.[].clusterNames":                                                 1000,
	"clusterAffinities.[].exclude":                                                      1000,
	"clusterAffinities.[].fieldSelector.matchExpressions":                               16,
	"clusterAffinities.[].fieldSelector.matchExpressions.[].values":                     64,
	"clusterTolerations":                                                                32,
	"spreadConstraints":                                                                 5,
	"replicaScheduling.weightPreference.staticWeightList":                               64,
	"replicaScheduling.weightPreference.staticWeightList.[].targetCluster.clusterNames": 1000,
}

// placementKeyBounds bound string lengths that CEL rules compare.
var placementKeyBounds = map[string]int64{
	"clusterAffinity.fieldSelector.matchExpressions.[].key":           63,
	"clusterAffinity.fieldSelector.matchExpressions.[].operator":      16,
	"clusterAffinities.[].fieldSelector.matchExpressions.[].key":      63,
	"clusterAffinities.[].fieldSelector.matchExpressions.[].operator": 16,
	"clusterTolerations.[].effect":                                    16,
	"spreadConstraints.[].spreadByField":                              16,
}

// selectorBounds bound spec.resourceSelectors[].labelSelector, by path below it ("{}" steps into
// a map's values), for the CEL rules that check every key and value the way labels.Selector does.
// A label key is at most 253 + 1 + 63 characters, a label value at most 63.
var selectorBounds = []struct {
	path, key string
	n         int64
}{
	{"matchExpressions", "maxItems", 16},
	{"matchExpressions.[].values", "maxItems", 64},
	{"matchExpressions.[].values.[]", "maxLength", 63},
	{"matchExpressions.[].key", "maxLength", 317},
	{"matchExpressions.[].operator", "maxLength", 16},
	{"matchLabels", "maxProperties", 64},
	{"matchLabels.{}", "maxLength", 63},
}

// labelValuePattern is a label value (k8s.io/apimachinery's IsValidLabelValue, with the length
// bounded above): empty, or alphanumerics, '-', '_' and '.' beginning and ending with an
// alphanumeric. A schema pattern costs nothing against the CEL budget, which a CEL rule over every
// value of every expression of every selector would exceed.
const labelValuePattern = `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`

// selectorPatterns are the patterns of spec.resourceSelectors[].labelSelector, by path below it.
var selectorPatterns = map[string]string{
	"matchExpressions.[].values.[]": labelValuePattern,
	"matchLabels.{}":                labelValuePattern,
}

func main() {
	dir := "deploy/crds"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	for _, name := range []string{"dbfleet.io_propagationpolicies.yaml", "dbfleet.io_clusterpropagationpolicies.yaml"} {
		if err := boundFile(filepath.Join(dir, name)); err != nil {
			fmt.Fprintln(os.Stderr, "crdbounds:", err)
			os.Exit(1)
		}
	}
}

func boundFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	versions, _ := lookup(crd, "spec", "versions").([]any)
	if len(versions) == 0 {
		return fmt.Errorf("%s: no spec.versions", path)
	}
	for _, v := range versions {
		root, _ := lookup(v, "schema", "openAPIV3Schema").(map[string]any)
		placement, err := walk(root, "spec.placement")
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for p, n := range placementBounds {
			if err := set(placement, p, "maxItems", n); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		for p, n := range placementKeyBounds {
			if err := set(placement, p, "maxLength", n); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		selector, err := walk(root, "spec.resourceSelectors.[].labelSelector")
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, b := range selectorBounds {
			s, err := walk(selector, b.path)
			if err != nil {
				return fmt.Errorf("%s: spec.resourceSelectors[].labelSelector.%s: %w", path, b.path, err)
			}
			s[b.key] = b.n
		}
		for p, pattern := range selectorPatterns {
			s, err := walk(selector, p)
			if err != nil {
				return fmt.Errorf("%s: spec.resourceSelectors[].labelSelector.%s: %w", path, p, err)
			}
			s["pattern"] = pattern
		}
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

func set(schema map[string]any, path, key string, n int64) error {
	s, err := walk(schema, path)
	if err != nil {
		return fmt.Errorf("spec.placement.%s: %w", path, err)
	}
	s[key] = n
	return nil
}

// walk follows a dotted path of property names through a schema; "[]" steps into array items,
// "{}" into a map's values.
func walk(s map[string]any, path string) (map[string]any, error) {
	for _, step := range strings.Split(path, ".") {
		var next any
		switch step {
		case "[]":
			next = s["items"]
		case "{}":
			next = s["additionalProperties"]
		default:
			next = lookup(s, "properties", step)
		}
		m, ok := next.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no schema at %q", step)
		}
		s = m
	}
	return s, nil
}

// lookup follows map keys through decoded YAML, returning nil when a step is missing.
func lookup(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
