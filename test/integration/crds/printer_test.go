package crds

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/test/framework"
)

// TestKubectlGetShowsPlacement asks the API server for the table kubectl prints for
// `kubectl get dbc`, after writing the status the hub would write.
func TestKubectlGetShowsPlacement(t *testing.T) {
	ctx := context.Background()
	ensureNamespace(ctx, t, "admission")
	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	dbc.Namespace, dbc.Name = "admission", uniqueName("printed")
	dbc.Spec.Engine, dbc.Spec.Version, dbc.Spec.Replicas = dbfleetv1alpha1.EnginePostgres, "16.4", 3
	dbc.Spec.Storage.Size.Set(1 << 30)
	if err := hub.Client.Create(ctx, dbc); err != nil {
		t.Fatal(err)
	}
	dbc.Status = dbfleetv1alpha1.DatabaseClusterStatus{
		Replicas: 3, ReadyReplicas: 2, Ready: "2/3", Clusters: "east,west",
		Primary: &dbfleetv1alpha1.PrimaryStatus{Cluster: "east", Epoch: 1},
		Placements: []dbfleetv1alpha1.ClusterPlacement{
			{Cluster: "east", Replicas: 2, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 0, Count: 2}},
			{Cluster: "west", Replicas: 1, Ordinals: dbfleetv1alpha1.OrdinalRange{Start: 2, Count: 1}},
		},
		Conditions: []metav1.Condition{{
			Type: dbfleetv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "PrimaryReady",
			LastTransitionTime: metav1.Now(),
		}},
	}
	if err := hub.Client.Status().Update(ctx, dbc); err != nil {
		t.Fatal(err)
	}

	cfg := rest.CopyConfig(hub.Config)
	cfg.GroupVersion = &dbfleetv1alpha1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(framework.Scheme).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	table := &metav1.Table{}
	err = rc.Get().Namespace(dbc.Namespace).Resource("databaseclusters").Name(dbc.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Into(table)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(table.Rows))
	}
	want := map[string]any{"Ready": "2/3", "Primary": "east", "Clusters": "east,west", "Available": "True"}
	for i, col := range table.ColumnDefinitions {
		if w, ok := want[col.Name]; ok {
			if got := table.Rows[0].Cells[i]; got != w {
				t.Errorf("column %s = %v, want %v", col.Name, got, w)
			}
			delete(want, col.Name)
		}
	}
	for name := range want {
		t.Errorf("kubectl get dbc has no %s column", name)
	}
}
