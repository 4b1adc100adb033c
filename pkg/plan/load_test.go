package plan

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// writeFile writes one YAML file for a test and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const (
	goodDatabase = `apiVersion: dbfleet.io/v1alpha1
kind: DatabaseCluster
metadata: {name: orders, namespace: shop}
spec: {engine: postgres, version: "16", replicas: 3, storage: {size: 1Gi}}
`
	goodPolicy = `apiVersion: dbfleet.io/v1alpha1
kind: PropagationPolicy
metadata: {name: production, namespace: shop}
spec:
  resourceSelectors: [{name: orders}]
  placement: {}
`
	goodMember = `apiVersion: dbfleet.io/v1alpha1
kind: MemberCluster
metadata: {name: east}
spec: {region: us-east}
`
)

// TestLoadFilesRefusesWhatTheAPIServerRefuses feeds one bad object at a time and checks that the
// error names the file, the document, the object and the field, with the API server's words.
func TestLoadFilesRefusesWhatTheAPIServerRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		// want are fragments of the error besides the file name.
		want []string
	}{
		{
			name: "empty name",
			doc:  strings.Replace(goodDatabase, "name: orders", `name: ""`, 1),
			want: []string{"document 1", "DatabaseCluster shop/", "metadata.name: Required value"},
		},
		{
			name: "name not a DNS name",
			doc:  strings.Replace(goodDatabase, "name: orders", "name: Orders_1", 1),
			want: []string{"DatabaseCluster shop/Orders_1", "metadata.name: Invalid value"},
		},
		{
			name: "name too long for a StatefulSet",
			doc:  strings.Replace(goodDatabase, "name: orders", "name: "+strings.Repeat("a", 53), 1),
			want: []string{"metadata.name must be a DNS label of at most 52 characters"},
		},
		{
			name: "namespace not a DNS label",
			doc:  strings.Replace(goodDatabase, "namespace: shop", "namespace: Shop", 1),
			want: []string{"metadata.namespace: Invalid value"},
		},
		{
			name: "engine oracle",
			doc:  strings.Replace(goodDatabase, "engine: postgres", "engine: oracle", 1),
			want: []string{"DatabaseCluster shop/orders", `spec.engine: Unsupported value: "oracle"`},
		},
		{
			name: "engine mysql",
			doc:  strings.Replace(goodDatabase, "engine: postgres", "engine: mysql", 1),
			want: []string{"spec.engine: Forbidden", "engine mysql is not supported yet"},
		},
		{
			name: "empty version",
			doc:  strings.Replace(goodDatabase, `version: "16"`, `version: ""`, 1),
			want: []string{"spec.version: Invalid value", "at least 1 chars long"},
		},
		{
			name: "negative size",
			doc:  strings.Replace(goodDatabase, "size: 1Gi", "size: -1Gi", 1),
			want: []string{"spec.storage.size", "size must be greater than zero"},
		},
		{
			name: "replicas beyond the maximum",
			doc:  strings.Replace(goodDatabase, "replicas: 3", "replicas: 2147483647", 1),
			want: []string{"spec.replicas: Invalid value: 2147483647", "less than or equal to 1000"},
		},
		{
			name: "replicas zero",
			doc:  strings.Replace(goodDatabase, "replicas: 3", "replicas: 0", 1),
			want: []string{"spec.replicas", "greater than or equal to 1"},
		},
		{
			name: "negative epoch in status",
			doc:  goodDatabase + "status: {primary: {cluster: east, epoch: -1}}\n",
			want: []string{"status.primary.epoch", "greater than or equal to 1"},
		},
		{
			name: "unknown label operator",
			doc:  strings.Replace(goodPolicy, "{name: orders}", "{labelSelector: {matchExpressions: [{key: tier, operator: Equals, values: [a]}]}}", 1),
			want: []string{"PropagationPolicy shop/production", "spec.resourceSelectors[0].labelSelector.matchExpressions", "operator must be In, NotIn, Exists or DoesNotExist"},
		},
		{
			name: "selector name no DatabaseCluster can have",
			doc:  strings.Replace(goodPolicy, "{name: orders}", "{name: Orders}", 1),
			want: []string{"spec.resourceSelectors[0].name: Invalid value"},
		},
		{
			name: "unknown field",
			doc:  strings.Replace(goodDatabase, "replicas: 3", "replicaz: 3", 1),
			want: []string{`unknown field "spec.replicaz"`},
		},
		{
			name: "placement rule",
			doc:  strings.Replace(goodPolicy, "placement: {}", "placement: {spreadConstraints: [{spreadByLabel: rack}]}", 1),
			want: []string{"spec.placement.spreadConstraints", "spreadByLabel is not supported yet"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "fleet.yaml", tc.doc)
			_, err := LoadFiles(context.Background(), []string{path})
			if err == nil {
				t.Fatal("accepted")
			}
			for _, want := range append(tc.want, path+": document 1: ") {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not say %q:\n%v", want, err)
				}
			}
		})
	}
}

// TestLoadFilesReportsEveryError: one run names every bad document of every file, and every bad
// field of one object.
func TestLoadFilesReportsEveryError(t *testing.T) {
	first := writeFile(t, "first.yaml", goodMember+"---\n"+
		strings.NewReplacer("engine: postgres", "engine: oracle", `version: "16"`, `version: ""`).Replace(goodDatabase))
	second := writeFile(t, "second.yaml", goodPolicy+"---\n"+goodMember+"---\n"+
		strings.Replace(goodDatabase, "size: 1Gi", "size: -1Gi", 1))
	_, err := LoadFiles(context.Background(), []string{first, second})
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{
		first + `: document 2: DatabaseCluster shop/orders: spec.engine: Unsupported value: "oracle"`,
		first + ": document 2: DatabaseCluster shop/orders: spec.version: Invalid value",
		second + ": document 2: MemberCluster east: metadata.name: Duplicate value: \"east\": the same object is already in " + first + ": document 1",
		second + ": document 3: DatabaseCluster shop/orders: spec.storage.size",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// TestLoadFilesRefusesDuplicates: the same kind, namespace and name twice is an error naming both
// places; the same name in another namespace or of another kind is not.
func TestLoadFilesRefusesDuplicates(t *testing.T) {
	path := writeFile(t, "fleet.yaml", goodDatabase+"---\n"+
		strings.Replace(goodDatabase, "replicas: 3", "replicas: 5", 1))
	_, err := LoadFiles(context.Background(), []string{path})
	if err == nil || !strings.Contains(err.Error(), path+": document 2: DatabaseCluster shop/orders: metadata.name: Duplicate value") ||
		!strings.Contains(err.Error(), "already in "+path+": document 1") {
		t.Fatalf("err = %v, want the second orders refused, naming the first", err)
	}

	other := writeFile(t, "other.yaml", goodDatabase+"---\n"+
		strings.Replace(goodDatabase, "namespace: shop", "namespace: lab", 1)+"---\n"+
		strings.Replace(goodPolicy, "name: production", "name: orders", 1))
	if _, err := LoadFiles(context.Background(), []string{other}); err != nil {
		t.Fatalf("same name in another namespace or kind refused: %v", err)
	}
}

// TestLoadFilesAppliesSchemaDefaults: the fleet holds the objects as the API server stores them.
func TestLoadFilesAppliesSchemaDefaults(t *testing.T) {
	path := writeFile(t, "fleet.yaml", strings.Replace(goodPolicy, "placement: {}", "placement: {}\n  failover: {application: {}}", 1)+
		"---\n"+strings.Replace(goodDatabase, ", namespace: shop", "", 1))
	fleet, err := LoadFiles(context.Background(), []string{path})
	if err != nil {
		t.Fatal(err)
	}
	app := fleet.Policies[0].Spec.Failover.Application
	if app.PurgeMode != dbfleetv1alpha1.PurgeGracefully || app.DecisionConditions.TolerationSeconds == nil || *app.DecisionConditions.TolerationSeconds != 300 {
		t.Errorf("failover.application = %+v, want the schema defaults (Gracefully, 300 s)", app)
	}
	if p := fleet.Policies[0].Spec.Priority; p == nil || *p != 0 {
		t.Errorf("priority = %v, want the schema default 0", p)
	}
	if ns := fleet.Databases[0].Namespace; ns != "default" {
		t.Errorf("namespace %q, want default as kubectl would", ns)
	}

	// The API server clears the namespace of a cluster-scoped object.
	path = writeFile(t, "member.yaml", strings.Replace(goodMember, "name: east", "name: east, namespace: shop", 1))
	if fleet, err = LoadFiles(context.Background(), []string{path}); err != nil {
		t.Fatal(err)
	}
	if ns := fleet.Members[0].Namespace; ns != "" {
		t.Errorf("MemberCluster namespace %q, want it cleared", ns)
	}
}
