package specs

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// The primary pod is the one spec.primaryOrdinal names, the lowest ordinal without it, and only
// in a primary share.
func TestPodRole(t *testing.T) {
	for _, tc := range []struct {
		name    string
		role    dbfleetv1alpha1.ReplicaRole
		primary *int32
		fenced  bool
		want    map[string]string
	}{
		{name: "without primaryOrdinal, the lowest ordinal", role: dbfleetv1alpha1.RolePrimary,
			want: map[string]string{"db-10": contract.PodRolePrimary, "db-11": contract.PodRoleReplica}},
		{name: "the ordinal named", role: dbfleetv1alpha1.RolePrimary, primary: ptr.To[int32](11),
			want: map[string]string{"db-10": contract.PodRoleReplica, "db-11": contract.PodRolePrimary}},
		{name: "the ordinal named, fenced", role: dbfleetv1alpha1.RolePrimary, primary: ptr.To[int32](11), fenced: true,
			want: map[string]string{"db-10": contract.PodRoleReplica, "db-11": contract.PodRoleFenced}},
		{name: "a replica share has no primary", role: dbfleetv1alpha1.RoleReplica,
			want: map[string]string{"db-10": contract.PodRoleReplica, "db-11": contract.PodRoleReplica}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mdb := &dbfleetv1alpha1.MemberDatabase{Spec: dbfleetv1alpha1.MemberDatabaseSpec{
				DatabaseRef: dbfleetv1alpha1.DatabaseReference{Name: "db"}, Replicas: 2,
				Ordinals: dbfleetv1alpha1.MemberOrdinals{Start: 10}, Role: tc.role, PrimaryOrdinal: tc.primary}}
			for pod, want := range tc.want {
				if got, err := PodRole(mdb, pod, tc.fenced); err != nil || got != want {
					t.Errorf("PodRole(%s) = %s, %v; want %s", pod, got, err, want)
				}
			}
		})
	}
}

// The promotion token reaches every pod of the share in the same patch as the epoch it belongs
// to, and a share without one clears it.
func TestPromotionTokenArrivesWithTheEpoch(t *testing.T) {
	mdb := &dbfleetv1alpha1.MemberDatabase{Spec: dbfleetv1alpha1.MemberDatabaseSpec{
		DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: "shop", Name: "orders"},
		Database:    dbfleetv1alpha1.DatabaseTemplate{Engine: dbfleetv1alpha1.EnginePostgres},
		Replicas:    2, Ordinals: dbfleetv1alpha1.MemberOrdinals{Start: 4}, Role: dbfleetv1alpha1.RolePrimary, Epoch: 3,
		PromoteAfterLSN: "0/30199A8"}}
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "orders-4"}}, {ObjectMeta: metav1.ObjectMeta{Name: "orders-5"}}}
	want := InstanceAnnotations(mdb, pods)
	if len(want) != 2 {
		t.Fatalf("annotations for %d pods, want 2: %v", len(want), want)
	}
	for pod, a := range want {
		if a[contract.AnnotationEpoch] != "3" || a[contract.AnnotationPromoteAfterLSN] != "0/30199A8" {
			t.Errorf("%s: %v, want epoch 3 with promote-after LSN 0/30199A8", pod, a)
		}
	}
	mdb.Spec.PromoteAfterLSN = ""
	for pod, a := range InstanceAnnotations(mdb, pods) {
		if v, ok := a[contract.AnnotationPromoteAfterLSN]; !ok || v != "" {
			t.Errorf("%s: promote-after LSN %q (set: %v), want it cleared", pod, v, ok)
		}
	}
}
