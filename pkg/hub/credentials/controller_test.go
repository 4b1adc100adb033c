package credentials

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestCredentialsConditionChanged(t *testing.T) {
	with := func(conds ...metav1.Condition) *dbfleetv1alpha1.DatabaseCluster {
		return &dbfleetv1alpha1.DatabaseCluster{Status: dbfleetv1alpha1.DatabaseClusterStatus{Conditions: conds}}
	}
	ready := metav1.Condition{Type: dbfleetv1alpha1.ConditionCredentialsReady, Status: metav1.ConditionTrue, Reason: "Ready"}
	available := metav1.Condition{Type: dbfleetv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "Available"}
	unready := ready
	unready.Status, unready.Reason = metav1.ConditionFalse, "SecretFailed"
	for _, tt := range []struct {
		name     string
		old, cur *dbfleetv1alpha1.DatabaseCluster
		want     bool
	}{
		{"another condition only", with(ready), with(ready, available), false},
		{"dropped by another writer", with(ready, available), with(available), true},
		{"changed", with(ready), with(unready), true},
		{"never there", with(available), with(available), false},
	} {
		if got := credentialsConditionChanged().Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.cur}); got != tt.want {
			t.Errorf("%s: %t, want %t", tt.name, got, tt.want)
		}
	}
}
