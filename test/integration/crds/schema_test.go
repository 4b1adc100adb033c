package crds

import (
	"context"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestImmutableFieldsSaySo(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(ctx, t, "admission")

	for _, tc := range []struct {
		name          string
		kind          string
		before, after string
		field         string
		message       string
	}{
		{
			name: "engine", kind: "DatabaseCluster",
			before: dbcSpec, after: strings.Replace(dbcSpec, "postgres", "custom", 1) + "  image: example.com/db:1\n",
			field: "spec.engine", message: "engine is immutable",
		},
		{
			name: "storage class changed", kind: "DatabaseCluster",
			before: dbcSpec + "    storageClassName: fast\n", after: dbcSpec + "    storageClassName: slow\n",
			field: "spec.storage.storageClassName", message: "storageClassName is immutable",
		},
		{
			name: "storage class added", kind: "DatabaseCluster",
			before: dbcSpec, after: dbcSpec + "    storageClassName: fast\n",
			field: "spec.storage.storageClassName", message: "storageClassName is immutable",
		},
		{
			name: "storage shrinks", kind: "DatabaseCluster",
			before: dbcSpec, after: strings.Replace(dbcSpec, "size: 1Gi", "size: 512Mi", 1),
			field: "spec.storage.size", message: "size cannot shrink",
		},
		{
			// The agent never meets a shrink either: the MemberDatabase carries the same rule.
			name: "member storage shrinks", kind: "MemberDatabase",
			before: mdbSpec + "  role: primary\n  epoch: 1\n",
			after:  strings.Replace(mdbSpec, "size: 1Gi", "size: 512Mi", 1) + "  role: primary\n  epoch: 1\n",
			field:  "spec.database.storage.size", message: "size cannot shrink",
		},
		{
			// Unset is the default user: setting another later is a change too.
			name: "postgres user", kind: "DatabaseCluster",
			before: dbcSpec, after: dbcSpec + "  postgres: {uid: 70}\n",
			field: "spec.postgres", message: "postgres.uid is immutable: the data directories belong to it",
		},
		{
			name: "postgres group", kind: "DatabaseCluster",
			before: dbcSpec + "  postgres: {gid: 70}\n", after: dbcSpec + "  postgres: {gid: 71}\n",
			field: "spec.postgres", message: "postgres.gid is immutable: the data directories belong to it",
		},
		{
			name: "postgres major version", kind: "DatabaseCluster",
			before: dbcSpec, after: strings.Replace(dbcSpec, `version: "16.4"`, `version: "17.1"`, 1),
			field: "spec.version", message: "the postgres major version cannot change (16.4 to 17.1): major upgrades (pg_upgrade) are not supported yet",
		},
		{
			name: "postgres major version of a share", kind: "MemberDatabase",
			before: mdbSpec + "  role: primary\n  epoch: 1\n",
			after:  strings.Replace(mdbSpec, `version: "16.4"`, `version: "15"`, 1) + "  role: primary\n  epoch: 1\n",
			field:  "spec.database.version", message: "the postgres major version cannot change (16.4 to 15)",
		},
		{
			name: "sync mode", kind: "MemberCluster",
			before: "  syncMode: Pull\n",
			after:  "  syncMode: Push\n  kubeconfigSecretRef: {namespace: dbfleet-system, name: east}\n",
			field:  "spec.syncMode", message: "syncMode is immutable",
		},
		{
			name: "database reference", kind: "MemberDatabase",
			before: mdbSpec + "  role: primary\n  epoch: 1\n",
			after:  strings.Replace(mdbSpec, "name: orders", "name: invoices", 1) + "  role: primary\n  epoch: 1\n",
			field:  "spec.databaseRef", message: "databaseRef is immutable",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName("immutable")
			obj := object(t, tc.kind, name, tc.before)
			if err := hub.Client.Create(ctx, obj, strict); err != nil {
				t.Fatalf("create: %v", err)
			}
			changed := object(t, tc.kind, name, tc.after)
			changed.SetResourceVersion(obj.GetResourceVersion())
			err := hub.Client.Update(ctx, changed, strict)
			assertInvalid(t, err, tc.field, tc.message)
		})
	}
}

func TestGrowingStorageIsAllowed(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(ctx, t, "admission")
	name := uniqueName("grow")
	obj := object(t, "DatabaseCluster", name, dbcSpec)
	if err := hub.Client.Create(ctx, obj, strict); err != nil {
		t.Fatalf("create: %v", err)
	}
	grown := object(t, "DatabaseCluster", name, strings.Replace(dbcSpec, "size: 1Gi", "size: 2Gi", 1))
	grown.SetResourceVersion(obj.GetResourceVersion())
	if err := hub.Client.Update(ctx, grown, strict); err != nil {
		t.Fatalf("growing storage from 1Gi to 2Gi rejected: %v", err)
	}
}

func TestMinorVersionChangeIsAllowed(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(ctx, t, "admission")
	for _, tc := range []struct{ from, to string }{{"16.4", "16.6"}, {"16.4", "16"}} {
		name := uniqueName("minor")
		obj := object(t, "DatabaseCluster", name, strings.Replace(dbcSpec, "16.4", tc.from, 1))
		if err := hub.Client.Create(ctx, obj, strict); err != nil {
			t.Fatalf("create: %v", err)
		}
		changed := object(t, "DatabaseCluster", name, strings.Replace(dbcSpec, "16.4", tc.to, 1))
		changed.SetResourceVersion(obj.GetResourceVersion())
		if err := hub.Client.Update(ctx, changed, strict); err != nil {
			t.Errorf("version %s to %s rejected: %v", tc.from, tc.to, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(ctx, t, "admission")

	dbc := object(t, "DatabaseCluster", uniqueName("defaults"), dbcSpec+"  primary: {}\n")
	create(ctx, t, dbc)
	expectField(t, dbc, "Retain", "spec", "storage", "retentionPolicy", "whenDeleted")
	expectField(t, dbc, "Retain", "spec", "storage", "retentionPolicy", "whenScaled")
	expectField(t, dbc, "Automatic", "spec", "primary", "failover")

	sync := object(t, "DatabaseCluster", uniqueName("defaults"), dbcSpec+"  postgres:\n    synchronous:\n      number: 1\n")
	create(ctx, t, sync)
	expectField(t, sync, "required", "spec", "postgres", "synchronous", "dataDurability")

	pp := object(t, "PropagationPolicy", uniqueName("defaults"), ppSelectors+
		"  placement:\n    replicaScheduling: {}\n  failover:\n    application: {}\n    cluster: {}\n")
	create(ctx, t, pp)
	expectField(t, pp, int64(0), "spec", "priority")
	expectField(t, pp, "Divided", "spec", "placement", "replicaScheduling", "replicaSchedulingType")
	expectField(t, pp, "Gracefully", "spec", "failover", "application", "purgeMode")
	expectField(t, pp, "Gracefully", "spec", "failover", "cluster", "purgeMode")
	expectField(t, pp, int64(300), "spec", "failover", "application", "decisionConditions", "tolerationSeconds")

	mc := object(t, "MemberCluster", uniqueName("defaults"), "  region: us-east\n")
	create(ctx, t, mc)
	expectField(t, mc, "Pull", "spec", "syncMode")
}

func create(ctx context.Context, t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	if err := hub.Client.Create(ctx, obj, strict); err != nil {
		t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
}

func expectField(t *testing.T, obj *unstructured.Unstructured, want any, path ...string) {
	t.Helper()
	got, found, err := unstructured.NestedFieldNoCopy(obj.Object, path...)
	if err != nil || !found || got != want {
		t.Errorf("%s %s: %s = %v (found %v, %v), want %v", obj.GetKind(), obj.GetName(), strings.Join(path, "."), got, found, err, want)
	}
}

func TestStatusIsASubresource(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(ctx, t, "admission")
	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	dbc.Namespace, dbc.Name = "admission", uniqueName("status")
	dbc.Spec.Engine, dbc.Spec.Version, dbc.Spec.Replicas = dbfleetv1alpha1.EnginePostgres, "16.4", 1
	dbc.Spec.Storage.Size.Set(1 << 30)
	if err := hub.Client.Create(ctx, dbc); err != nil {
		t.Fatalf("create: %v", err)
	}

	// A spec update must not be able to write status...
	dbc.Status.Ready = "1/1"
	if err := hub.Client.Update(ctx, dbc); err != nil {
		t.Fatalf("update: %v", err)
	}
	if dbc.Status.Ready != "" {
		t.Errorf("status written through the main resource: %q", dbc.Status.Ready)
	}
	// ...while the status subresource can.
	dbc.Status.Ready = "1/1"
	if err := hub.Client.Status().Update(ctx, dbc); err != nil {
		t.Fatalf("status update: %v", err)
	}
	got := &dbfleetv1alpha1.DatabaseCluster{}
	if err := hub.Client.Get(ctx, client.ObjectKeyFromObject(dbc), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Ready != "1/1" {
		t.Errorf("status.ready = %q after a status update, want 1/1", got.Status.Ready)
	}
}

func TestNamesAndPrinterColumns(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		crd       string
		scope     apiextensionsv1.ResourceScope
		shortName string
		status    bool
		columns   []string
	}{
		{"databaseclusters.dbfleet.io", apiextensionsv1.NamespaceScoped, "dbc", true,
			[]string{"Ready", "Primary", "Clusters", "Available", "Age"}},
		{"propagationpolicies.dbfleet.io", apiextensionsv1.NamespaceScoped, "pp", false,
			[]string{"Priority", "Age"}},
		{"clusterpropagationpolicies.dbfleet.io", apiextensionsv1.ClusterScoped, "cpp", false,
			[]string{"Priority", "Age"}},
		{"memberclusters.dbfleet.io", apiextensionsv1.ClusterScoped, "mc", true,
			[]string{"Region", "Zone", "Mode", "Ready", "Version", "Age"}},
		{"memberdatabases.dbfleet.io", apiextensionsv1.NamespaceScoped, "mdb", true,
			[]string{"Database", "Role", "Epoch", "Replicas", "Ready", "Version", "Age"}},
	} {
		t.Run(tc.crd, func(t *testing.T) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := hub.Client.Get(ctx, client.ObjectKey{Name: tc.crd}, crd); err != nil {
				t.Fatal(err)
			}
			if crd.Spec.Scope != tc.scope {
				t.Errorf("scope = %s, want %s", crd.Spec.Scope, tc.scope)
			}
			if !slices.Contains(crd.Spec.Names.ShortNames, tc.shortName) {
				t.Errorf("short names %v lack %q", crd.Spec.Names.ShortNames, tc.shortName)
			}
			if !slices.Contains(crd.Spec.Names.Categories, "dbfleet") {
				t.Errorf("categories %v lack dbfleet", crd.Spec.Names.Categories)
			}
			version := crd.Spec.Versions[0]
			if hasStatus := version.Subresources != nil && version.Subresources.Status != nil; hasStatus != tc.status {
				t.Errorf("status subresource = %v, want %v", hasStatus, tc.status)
			}
			var columns []string
			for _, c := range version.AdditionalPrinterColumns {
				if c.Priority == 0 {
					columns = append(columns, c.Name)
				}
			}
			for _, want := range tc.columns {
				if !slices.Contains(columns, want) {
					t.Errorf("printer columns %v lack %s", columns, want)
				}
			}
		})
	}
}
