package crds

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/test/framework"
)

var nameSeq atomic.Int64

// uniqueName keeps the table's objects from colliding on the shared API server.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1))
}

// ensureNamespace creates ns if it does not exist yet.
func ensureNamespace(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	err := hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
}

// object builds one dbfleet object from a kind, a name and the YAML of its spec (indented by
// two spaces, as it would sit under "spec:"). Namespaced kinds go to namespace "admission".
func object(t *testing.T, kind, name, spec string) *unstructured.Unstructured {
	t.Helper()
	meta := "  name: " + name
	switch kind {
	case "DatabaseCluster", "PropagationPolicy", "MemberDatabase":
		meta += "\n  namespace: admission"
	}
	doc := fmt.Sprintf("apiVersion: dbfleet.io/v1alpha1\nkind: %s\nmetadata:\n%s\nspec:\n%s", kind, meta, spec)
	objs, err := framework.DecodeObjects([]byte(doc))
	if err != nil || len(objs) != 1 {
		t.Fatalf("test object %s does not parse (%v):\n%s", name, err, doc)
	}
	return objs[0]
}

// strict makes the API server reject unknown fields, as kubectl does.
var strict = client.FieldValidation(metav1.FieldValidationStrict)

func TestSamplesAreAccepted(t *testing.T) {
	ctx := context.Background()
	files, err := filepath.Glob(filepath.Join(framework.SamplesDir(), "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in %s (%v)", framework.SamplesDir(), err)
	}
	kinds := map[string]bool{}
	for _, file := range files {
		objs, err := framework.ReadObjects(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			kinds[obj.GetKind()] = true
			t.Run(filepath.Base(file)+"/"+obj.GetName(), func(t *testing.T) {
				if ns := obj.GetNamespace(); ns != "" {
					ensureNamespace(ctx, t, ns)
				}
				if err := hub.Client.Create(ctx, obj, strict); err != nil {
					t.Fatalf("sample %s %s rejected: %v", obj.GetKind(), obj.GetName(), err)
				}
			})
		}
	}
	for _, kind := range []string{"DatabaseCluster", "PropagationPolicy", "ClusterPropagationPolicy", "MemberCluster", "MemberDatabase"} {
		if !kinds[kind] {
			t.Errorf("deploy/samples has no %s", kind)
		}
	}
}

// Valid specs that the invalid cases below change in one place.
const (
	dbcSpec = `  engine: postgres
  version: "16.4"
  replicas: 3
  storage:
    size: 1Gi
`
	ppSelectors = `  resourceSelectors:
    - name: orders
`
	mdbSpec = `  databaseRef: {namespace: shop, name: orders}
  database: {engine: postgres, version: "16.4", storage: {size: 1Gi}}
  replicas: 1
  ordinals: {start: 0}
`
)

func TestInvalidObjectsAreRejected(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(ctx, t, "admission")

	for _, tc := range []struct {
		name string
		kind string
		spec string
		// field must appear in the error as "<field>:", so the user sees what to fix.
		field string
		// message is a fragment of the explanation.
		message string
	}{
		{
			name: "replicas zero", kind: "DatabaseCluster",
			spec:  strings.Replace(dbcSpec, "replicas: 3", "replicas: 0", 1),
			field: "spec.replicas", message: "greater than or equal to 1",
		},
		{
			name: "unknown engine", kind: "DatabaseCluster",
			spec:  strings.Replace(dbcSpec, "postgres", "oracle", 1),
			field: "spec.engine", message: `supported values: "postgres", "mysql", "custom"`,
		},
		{
			// In the enum, so the refusal is ours and says why.
			name: "mysql engine", kind: "DatabaseCluster",
			spec:  strings.Replace(dbcSpec, "postgres", "mysql", 1),
			field: "spec.engine", message: "engine mysql is not supported yet: dbfleet has no MySQL data plane (replication, fencing); use postgres, or custom to run your own image",
		},
		{
			name: "custom engine without image", kind: "DatabaseCluster",
			spec:  strings.Replace(dbcSpec, "postgres", "custom", 1),
			field: "spec.image", message: "image is required when engine is custom",
		},
		{
			name: "storage size not a quantity", kind: "DatabaseCluster",
			spec:  strings.Replace(dbcSpec, "size: 1Gi", "size: ten-gigs", 1),
			field: "spec.storage.size", message: "should match",
		},
		{
			name: "storage size zero", kind: "DatabaseCluster",
			spec:  strings.Replace(dbcSpec, "size: 1Gi", `size: "0"`, 1),
			field: "spec.storage.size", message: "size must be greater than zero",
		},
		{
			name: "missing version", kind: "DatabaseCluster",
			spec:  strings.Replace(dbcSpec, `  version: "16.4"`+"\n", "", 1),
			field: "spec.version", message: "Required value",
		},
		{
			name: "synchronous number not below replicas", kind: "DatabaseCluster",
			spec:  dbcSpec + "  postgres:\n    synchronous:\n      number: 3\n",
			field: "spec.postgres.synchronous.number", message: "postgres.synchronous.number must be below replicas: the primary is not its own standby",
		},
		{
			name: "synchronous number zero", kind: "DatabaseCluster",
			spec:  dbcSpec + "  postgres:\n    synchronous:\n      number: 0\n",
			field: "spec.postgres.synchronous.number", message: "greater than or equal to 1",
		},
		{
			name: "unknown data durability", kind: "DatabaseCluster",
			spec:  dbcSpec + "  postgres:\n    synchronous:\n      number: 1\n      dataDurability: eventually\n",
			field: "spec.postgres.synchronous.dataDurability", message: `supported values: "required", "preferred"`,
		},
		{
			name: "postgres settings on custom", kind: "DatabaseCluster",
			spec:  strings.Replace(dbcSpec, "postgres", "custom", 1) + "  image: example.com/db:1\n  postgres:\n    synchronous:\n      number: 1\n",
			field: "spec.postgres", message: "postgres settings apply only to engine postgres",
		},
		{
			name: "unknown failover mode", kind: "DatabaseCluster",
			spec:  dbcSpec + "  primary:\n    failover: Sometimes\n",
			field: "spec.primary.failover", message: `supported values: "Automatic", "Manual"`,
		},
		{
			name: "unknown volume retention", kind: "DatabaseCluster",
			spec:  dbcSpec + "    retentionPolicy:\n      whenDeleted: Keep\n",
			field: "spec.storage.retentionPolicy.whenDeleted", message: `supported values: "Retain", "Delete"`,
		},
		{
			name: "reserved pod label", kind: "DatabaseCluster",
			spec:  dbcSpec + "  template:\n    labels:\n      dbfleet.io/role: primary\n",
			field: "spec.template.labels", message: "labels under dbfleet.io/ are reserved",
		},
		{
			name: "policy without resource selectors", kind: "PropagationPolicy",
			spec:  "  resourceSelectors: []\n  placement: {}\n",
			field: "spec.resourceSelectors", message: "should have at least 1 items",
		},
		{
			name: "duplicated mixed with divided settings", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    replicaScheduling:
      replicaSchedulingType: Duplicated
      replicaDivisionPreference: Weighted
`,
			field: "spec.placement.replicaScheduling", message: "apply only to Divided scheduling, not Duplicated",
		},
		{
			name: "static weight zero", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    replicaScheduling:
      replicaSchedulingType: Divided
      replicaDivisionPreference: Weighted
      weightPreference:
        staticWeightList:
          - targetCluster: {clusterNames: [east]}
            weight: 0
`,
			field: "spec.placement.replicaScheduling.weightPreference.staticWeightList[0].weight", message: "greater than or equal to 1",
		},
		{
			name: "minGroups above maxGroups", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    spreadConstraints:
      - spreadByField: region
        minGroups: 3
        maxGroups: 2
`,
			field: "spec.placement.spreadConstraints", message: "minGroups must not exceed maxGroups",
		},
		{
			name: "spread by label", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    spreadConstraints:
      - spreadByLabel: topology.example.com/rack
        maxGroups: 2
`,
			field: "spec.placement.spreadConstraints", message: "spreadByLabel is not supported yet",
		},
		{
			name: "spread by unknown field", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    spreadConstraints:
      - spreadByField: country
`,
			field: "spec.placement.spreadConstraints[0].spreadByField", message: `supported values: "cluster", "region", "zone", "provider"`,
		},
		{
			name: "same spread field twice", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    spreadConstraints:
      - spreadByField: region
      - spreadByField: region
`,
			field: "spec.placement.spreadConstraints", message: "each spreadByField may appear only once",
		},
		{
			name: "affinity and affinities together", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    clusterAffinity: {clusterNames: [east]}
    clusterAffinities:
      - affinityName: main
        clusterNames: [west]
`,
			field: "spec.placement", message: "clusterAffinity and clusterAffinities cannot both be set",
		},
		{
			name: "field selector on an unknown field", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    clusterAffinity:
      fieldSelector:
        matchExpressions:
          - {key: name, operator: In, values: [east]}
`,
			field: "spec.placement.clusterAffinity.fieldSelector", message: "key must be provider, region or zone",
		},
		{
			name: "unknown dynamic weight", kind: "PropagationPolicy",
			spec: ppSelectors + `  placement:
    replicaScheduling:
      replicaDivisionPreference: Weighted
      weightPreference: {dynamicWeight: CPU}
`,
			field: "spec.placement.replicaScheduling.weightPreference.dynamicWeight", message: `supported values: "AvailableReplicas"`,
		},
		{
			name: "namespace in a PropagationPolicy selector", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - {namespace: other, name: orders}\n  placement: {}\n",
			field: "spec.resourceSelectors", message: "a PropagationPolicy selects only in its own namespace",
		},
		{
			name: "selector name no DatabaseCluster can have", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - name: Orders_1\n  placement: {}\n",
			field: "spec.resourceSelectors[0].name", message: "should match",
		},
		{
			name: "selector name too long for a DatabaseCluster", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - name: " + strings.Repeat("a", 53) + "\n  placement: {}\n",
			field: "spec.resourceSelectors[0].name", message: "may not be more than 52 bytes",
		},
		{
			name: "selector namespace not a DNS label", kind: "ClusterPropagationPolicy",
			spec:  "  resourceSelectors:\n    - namespace: Shop\n  placement: {}\n",
			field: "spec.resourceSelectors[0].namespace", message: "should match",
		},
		{
			name: "selector with name and labelSelector", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - name: orders\n      labelSelector: {matchLabels: {tier: gold}}\n  placement: {}\n",
			field: "spec.resourceSelectors[0]", message: "set name or labelSelector, not both",
		},
		{
			name: "label selector with an unknown operator", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - labelSelector:\n        matchExpressions: [{key: tier, operator: Equals, values: [gold]}]\n  placement: {}\n",
			field: "spec.resourceSelectors[0].labelSelector.matchExpressions", message: "operator must be In, NotIn, Exists or DoesNotExist",
		},
		{
			name: "label selector In without values", kind: "ClusterPropagationPolicy",
			spec:  "  resourceSelectors:\n    - labelSelector:\n        matchExpressions: [{key: tier, operator: In}]\n  placement: {}\n",
			field: "spec.resourceSelectors[0].labelSelector.matchExpressions", message: "values must not be empty for operator In or NotIn",
		},
		{
			name: "label selector Exists with values", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - labelSelector:\n        matchExpressions: [{key: tier, operator: Exists, values: [gold]}]\n  placement: {}\n",
			field: "spec.resourceSelectors[0].labelSelector.matchExpressions", message: "values must be empty for operator Exists or DoesNotExist",
		},
		{
			name: "label selector key not a label key", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - labelSelector:\n        matchExpressions: [{key: 'tier/gold/x', operator: Exists}]\n  placement: {}\n",
			field: "spec.resourceSelectors[0].labelSelector.matchExpressions", message: "key must be a label key",
		},
		{
			name: "label selector value not a label value", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - labelSelector:\n        matchExpressions: [{key: tier, operator: NotIn, values: ['gold silver']}]\n  placement: {}\n",
			field: "spec.resourceSelectors[0].labelSelector.matchExpressions[0].values[0]", message: "should match",
		},
		{
			name: "matchLabels key not a label key", kind: "ClusterPropagationPolicy",
			spec:  "  resourceSelectors:\n    - labelSelector: {matchLabels: {'-tier': gold}}\n  placement: {}\n",
			field: "spec.resourceSelectors[0].labelSelector.matchLabels", message: "matchLabels keys must be label keys",
		},
		{
			name: "matchLabels value not a label value", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - labelSelector: {matchLabels: {tier: 'gold!'}}\n  placement: {}\n",
			field: "spec.resourceSelectors[0].labelSelector.matchLabels.tier", message: "should match",
		},
		{
			name: "matchLabels value too long", kind: "PropagationPolicy",
			spec:  "  resourceSelectors:\n    - labelSelector: {matchLabels: {tier: " + strings.Repeat("g", 64) + "}}\n  placement: {}\n",
			field: "spec.resourceSelectors[0].labelSelector.matchLabels.tier", message: "may not be more than 63 bytes",
		},
		{
			name: "unknown purge mode", kind: "PropagationPolicy",
			spec:  ppSelectors + "  placement: {}\n  failover:\n    application:\n      purgeMode: Sometimes\n",
			field: "spec.failover.application.purgeMode", message: `supported values: "Immediately", "Gracefully", "Never"`,
		},
		{
			name: "grace period without graceful purge", kind: "PropagationPolicy",
			spec:  ppSelectors + "  placement: {}\n  failover:\n    application:\n      purgeMode: Never\n      gracePeriodSeconds: 60\n",
			field: "spec.failover.application.gracePeriodSeconds", message: "only when purgeMode is Gracefully",
		},
		{
			name: "cluster failover grace period without graceful purge", kind: "PropagationPolicy",
			spec:  ppSelectors + "  placement: {}\n  failover:\n    cluster:\n      purgeMode: Immediately\n      gracePeriodSeconds: 60\n",
			field: "spec.failover.cluster.gracePeriodSeconds", message: "only when purgeMode is Gracefully",
		},
		{
			name: "unknown cluster purge mode", kind: "PropagationPolicy",
			spec:  ppSelectors + "  placement: {}\n  failover:\n    cluster:\n      purgeMode: Later\n",
			field: "spec.failover.cluster.purgeMode", message: `supported values: "Immediately", "Gracefully", "Never"`,
		},
		{
			name: "unknown scheduling type", kind: "ClusterPropagationPolicy",
			spec:  ppSelectors + "  placement:\n    replicaScheduling:\n      replicaSchedulingType: Split\n",
			field: "spec.placement.replicaScheduling.replicaSchedulingType", message: `supported values: "Duplicated", "Divided"`,
		},
		{
			name: "weights with aggregated division", kind: "ClusterPropagationPolicy",
			spec: ppSelectors + `  placement:
    replicaScheduling:
      replicaDivisionPreference: Aggregated
      weightPreference: {dynamicWeight: AvailableReplicas}
`,
			field: "spec.placement.replicaScheduling.weightPreference", message: "only when replicaDivisionPreference is Weighted",
		},
		{
			name: "PreferNoSchedule toleration", kind: "ClusterPropagationPolicy",
			spec:  ppSelectors + "  placement:\n    clusterTolerations:\n      - {key: dedicated, operator: Exists, effect: PreferNoSchedule}\n",
			field: "spec.placement.clusterTolerations", message: "PreferNoSchedule are not supported yet",
		},
		{
			name: "unknown sync mode", kind: "MemberCluster",
			spec:  "  region: us-east\n  syncMode: Both\n",
			field: "spec.syncMode", message: `supported values: "Pull", "Push"`,
		},
		{
			name: "push without kubeconfig", kind: "MemberCluster",
			spec:  "  syncMode: Push\n",
			field: "spec.kubeconfigSecretRef", message: "kubeconfigSecretRef is required when syncMode is Push",
		},
		{
			name: "member taint PreferNoSchedule", kind: "MemberCluster",
			spec:  "  taints:\n    - {key: dedicated, effect: PreferNoSchedule}\n",
			field: "spec.taints", message: "must be NoSchedule or NoExecute",
		},
		{
			// No pod may run as an account that already exists in a member (kube-system's, say).
			name: "pods as a ServiceAccount of the member's", kind: "DatabaseCluster",
			spec:  dbcSpec + "  template:\n    serviceAccountName: default\n",
			field: "spec.template.serviceAccountName", message: "the pods run as the ServiceAccount dbfleet creates (<db>-instance)",
		},
		{
			name: "reserved label on the ServiceAccount", kind: "DatabaseCluster",
			spec:  dbcSpec + "  serviceAccountTemplate:\n    metadata:\n      labels: {dbfleet.io/database: other}\n",
			field: "spec.serviceAccountTemplate.metadata.labels", message: "labels under dbfleet.io/ are reserved",
		},
		{
			name: "unknown member role", kind: "MemberDatabase",
			spec:  mdbSpec + "  role: leader\n  epoch: 1\n",
			field: "spec.role", message: `supported values: "primary", "replica"`,
		},
		{
			// The agent has no MySQL data plane either: the share carries the same rule.
			name: "mysql share", kind: "MemberDatabase",
			spec:  strings.Replace(mdbSpec, "engine: postgres", "engine: mysql", 1) + "  role: primary\n  epoch: 1\n",
			field: "spec.database.engine", message: "engine mysql is not supported yet",
		},
		{
			name: "epoch zero", kind: "MemberDatabase",
			spec:  mdbSpec + "  role: primary\n  epoch: 0\n",
			field: "spec.epoch", message: "greater than or equal to 1",
		},
		{
			name: "negative share", kind: "MemberDatabase",
			spec:  strings.Replace(mdbSpec, "replicas: 1", "replicas: -1", 1) + "  role: replica\n  epoch: 1\n",
			field: "spec.replicas", message: "greater than or equal to 0",
		},
		{
			name: "primary pod outside the share", kind: "MemberDatabase",
			spec:  mdbSpec + "  role: primary\n  epoch: 1\n  primaryOrdinal: 1\n",
			field: "spec", message: "primaryOrdinal must be one of the share's ordinals",
		},
		{
			name: "primary pod on a replica share", kind: "MemberDatabase",
			spec:  mdbSpec + "  role: replica\n  epoch: 1\n  primaryOrdinal: 0\n",
			field: "spec", message: "only a primary share names a primaryOrdinal",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(t, tc.kind, uniqueName("bad"), tc.spec)
			err := hub.Client.Create(ctx, obj, strict)
			assertInvalid(t, err, tc.field, tc.message)
		})
	}
}

// TestValidResourceSelectorsAreAccepted: every form labels.Selector accepts passes admission.
func TestValidResourceSelectorsAreAccepted(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(ctx, t, "admission")
	for _, kind := range []string{"PropagationPolicy", "ClusterPropagationPolicy"} {
		spec := `  resourceSelectors:
    - {}
    - name: orders
    - name: ` + strings.Repeat("a", 52) + `
    - labelSelector: {}
    - labelSelector:
        matchLabels: {tier: gold, example.com/team: db-team_1, empty: ""}
        matchExpressions:
          - {key: tier, operator: In, values: [gold, silver]}
          - {key: example.com/zone, operator: NotIn, values: [a.b-c_d]}
          - {key: legacy, operator: Exists}
          - {key: legacy, operator: DoesNotExist, values: []}
  placement: {}
`
		if kind == "ClusterPropagationPolicy" { // only its selectors may name a namespace
			spec = strings.Replace(spec, "    - {}\n", "    - {}\n    - namespace: shop\n    - {namespace: shop, name: orders}\n", 1)
		}
		obj := object(t, kind, uniqueName("selectors"), spec)
		if err := hub.Client.Create(ctx, obj, strict); err != nil {
			t.Errorf("%s with valid selectors rejected: %v", kind, err)
		}
	}
}

func TestDatabaseClusterNameMustFitAStatefulSet(t *testing.T) {
	obj := object(t, "DatabaseCluster", strings.Repeat("a", 53), dbcSpec)
	err := hub.Client.Create(context.Background(), obj, strict)
	assertInvalid(t, err, "", "metadata.name must be a DNS label of at most 52 characters")
}

func TestMemberClusterNameMustFitItsNamespace(t *testing.T) {
	obj := object(t, "MemberCluster", strings.Repeat("a", 57), "  region: us-east\n")
	err := hub.Client.Create(context.Background(), obj, strict)
	// A rule on the object root cannot point at metadata.name, so the message itself names it.
	assertInvalid(t, err, "", "metadata.name must be a DNS label of at most 56 characters")
}

// assertInvalid checks that err is a 422 Invalid whose message names field (unless empty) and says
// message.
func assertInvalid(t *testing.T, err error, field, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want rejection naming %s", field)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid (422) error naming %s", err, field)
	}
	if field != "" && !strings.Contains(err.Error(), field+":") {
		t.Errorf("error does not name field %s:\n%v", field, err)
	}
	if !strings.Contains(err.Error(), message) {
		t.Errorf("error does not say %q:\n%v", message, err)
	}
}
