package predicates

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

func TestNotStatusOnly(t *testing.T) {
	base := func() *dbfleetv1alpha1.MemberDatabase {
		return &dbfleetv1alpha1.MemberDatabase{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 3, ResourceVersion: "10",
			Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"b": "2"}}}
	}
	now := metav1.Now()
	tests := []struct {
		name   string
		change func(*dbfleetv1alpha1.MemberDatabase)
		want   bool
	}{
		{"status only", func(m *dbfleetv1alpha1.MemberDatabase) {
			m.ResourceVersion = "11"
			m.Status.Epoch = 4
		}, false},
		{"spec (generation)", func(m *dbfleetv1alpha1.MemberDatabase) { m.Generation = 4 }, true},
		{"a label", func(m *dbfleetv1alpha1.MemberDatabase) { m.Labels["a"] = "2" }, true},
		{"an annotation", func(m *dbfleetv1alpha1.MemberDatabase) { m.Annotations["c"] = "3" }, true},
		{"deletion started", func(m *dbfleetv1alpha1.MemberDatabase) { m.DeletionTimestamp = &now }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, cur := base(), base()
			tt.change(cur)
			if got := NotStatusOnly().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: cur}); got != tt.want {
				t.Errorf("Update = %t, want %t", got, tt.want)
			}
		})
	}
	if !NotStatusOnly().Create(event.CreateEvent{Object: base()}) || !NotStatusOnly().Delete(event.DeleteEvent{Object: base()}) {
		t.Error("creates and deletes must pass")
	}
}
