package e2e

import (
	"context"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// tolerateUnreachable lets a silent member keep its share for d after the hub taints it; then
// its replicas move.
func tolerateUnreachable(d time.Duration) []corev1.Toleration {
	if defaultTimings {
		return nil // the hub's --default-unreachable-toleration
	}
	return []corev1.Toleration{{
		Key: dbfleetv1alpha1.TaintClusterUnreachable, Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(d / time.Second)),
	}}
}

// staticWeights divides the replicas among the named clusters by weight.
func staticWeights(weights map[string]int64) policyv1alpha1.Placement {
	var list []policyv1alpha1.StaticClusterWeight
	for _, m := range members { // in a fixed order
		if w, ok := weights[m]; ok {
			list = append(list, policyv1alpha1.StaticClusterWeight{
				TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: w})
		}
	}
	return policyv1alpha1.Placement{
		ClusterTolerations: tolerateUnreachable(toleration),
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{StaticWeightList: list},
		},
	}
}

// evenly divides the replicas equally among all members.
func evenly() policyv1alpha1.Placement {
	return staticWeights(map[string]int64{"east": 1, "west": 1, "central": 1})
}

// dynamicWeights divides by available replicas (for databases that request nothing, every
// member weighs the same) and is steady: when the fleet changes, replicas stay where they are,
// so nothing moves back to a member that returns.
func dynamicWeights() policyv1alpha1.Placement {
	return policyv1alpha1.Placement{
		ClusterTolerations: tolerateUnreachable(toleration),
		ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
			ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
			ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
			WeightPreference:          &policyv1alpha1.ClusterPreferences{DynamicWeight: policyv1alpha1.DynamicWeightByAvailableReplicas},
		},
	}
}

// setUp creates the test's namespace on the hub and a PropagationPolicy "placement" in it that
// selects every DatabaseCluster there.
func (f *federation) setUp(t *testing.T, ns string, placement policyv1alpha1.Placement) *dbfleetv1alpha1.PropagationPolicy {
	t.Helper()
	ctx := context.Background()
	if err := f.hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	pp := &dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "placement"},
		Spec: dbfleetv1alpha1.PropagationSpec{
			ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{}},
			Placement:         placement,
		},
	}
	if err := f.hub.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	return pp
}

// newDatabase is a PostgreSQL 15 of the given replicas whose primary prefers the given cluster
// ("" for no preference). It requests no resources, so capacity never limits placement.
func newDatabase(ns, name string, replicas int32, primary string) *dbfleetv1alpha1.DatabaseCluster {
	dbc := &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{
				Engine: dbfleetv1alpha1.EnginePostgres, Version: "15", // postgres:15, imported into every node
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
			},
			Replicas: replicas,
		},
	}
	if primary != "" {
		dbc.Spec.Primary = &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{primary}}
	}
	return dbc
}

// withSuperuserFromNetwork lets the test log in as dbc's superuser from outside its pods, as
// only a test should: by default the superuser logs in over loopback alone (docs/security.md),
// and a test that reads every column of pg_stat_replication or pauses a standby's replay needs
// it. The instance manager reads DBFLEET_SUPERUSER_FROM_NETWORK; the user's env comes after the
// agent's, so it wins.
func withSuperuserFromNetwork(dbc *dbfleetv1alpha1.DatabaseCluster) *dbfleetv1alpha1.DatabaseCluster {
	if dbc.Spec.Template == nil {
		dbc.Spec.Template = &dbfleetv1alpha1.PodTemplateOverrides{}
	}
	dbc.Spec.Template.Env = append(dbc.Spec.Template.Env, corev1.EnvVar{Name: contract.EnvSuperuserFromNetwork, Value: "true"})
	return dbc
}

// create creates dbc on the hub; the test's cleanup deletes it and waits until every member
// has removed its share (so the next test starts on an empty fleet).
func (f *federation) create(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster) {
	t.Helper()
	if err := f.hub.Create(context.Background(), dbc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.deleteAndWait(t, dbc) })
}

// deleteAndWait deletes dbc and waits until the hub has let it go, which it does once every
// member's agent confirmed removing its share.
func (f *federation) deleteAndWait(t *testing.T, dbc *dbfleetv1alpha1.DatabaseCluster) time.Duration {
	t.Helper()
	start := time.Now()
	if err := f.hub.Delete(context.Background(), dbc); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	await(t, 2*time.Minute, "DatabaseCluster "+dbc.Name+" to be deleted", func(ctx context.Context) (bool, error) {
		err := f.hub.Get(ctx, client.ObjectKeyFromObject(dbc), &dbfleetv1alpha1.DatabaseCluster{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	return time.Since(start)
}
