package hub

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestDatabaseClusterInAReservedNamespaceIsNotPlaced: on a hub without its admission policy (this
// API server has none), a DatabaseCluster in a kube-* namespace, which would put pods of the
// author's choice into every member's kube-* namespace, gets no share, no credentials and says
// why, with an Event.
func TestDatabaseClusterInAReservedNamespaceIsNotPlaced(t *testing.T) {
	f := newFixture(t)
	f.ns = "kube-" + f.suite
	f.createNamespace(f.ns)
	startHubWithCredentials(t)
	f.member("a", "r1", 100)
	f.policy("all", 0, map[string]string{"app": "orders"}, nil)
	// Created as f.database does, once no admission policy of an earlier test refuses it (the
	// API server drops a deleted policy asynchronously).
	dbc := &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "orders", Labels: map[string]string{"app": "orders"}},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{Replicas: 1, DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{
			Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.4", Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")}}},
	}
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "the DatabaseCluster created", func(ctx context.Context) (bool, error) {
		err := f.c.Create(ctx, dbc)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}

	f.waitDatabase("orders", "refused", func(d *dbfleetv1alpha1.DatabaseCluster) bool {
		return hasCondition(d, dbfleetv1alpha1.ConditionScheduled, metav1.ConditionFalse, dbfleetv1alpha1.ReasonReservedNamespace) &&
			hasCondition(d, dbfleetv1alpha1.ConditionCredentialsReady, metav1.ConditionFalse, dbfleetv1alpha1.ReasonReservedNamespace)
	})
	f.waitEvent("orders", dbfleetv1alpha1.ReasonReservedNamespace, "namespace "+f.ns+" may hold no database", "kube-* belong to Kubernetes")

	dbc = f.getDatabase("orders")
	if len(dbc.Status.Placements) != 0 || dbc.Status.Primary != nil {
		t.Errorf("placed: %s", describe(dbc))
	}
	if shares := f.memberDatabases("orders"); len(shares) != 0 {
		t.Errorf("%d MemberDatabases written for a database in %s", len(shares), f.ns)
	}
	secrets := &corev1.SecretList{}
	if err := f.c.List(f.ctx, secrets, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		t.Errorf("Secret %s made in %s", s.Name, f.ns)
	}
}
