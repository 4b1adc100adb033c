package member

import (
	"testing"

	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// The primary pod is the one spec.primaryOrdinal names, the lowest ordinal without it, and only
// in a primary share.
func TestPodRole(t *testing.T) {
	for _, tc := range []struct {
		name    string
		role    dbfleetv1alpha1.ReplicaRole
		primary *int32
		fenced  bool
		want    map[string]dbfleetv1alpha1.ReplicaRole
	}{
		{name: "without primaryOrdinal, the lowest ordinal", role: dbfleetv1alpha1.RolePrimary,
			want: map[string]dbfleetv1alpha1.ReplicaRole{"db-10": dbfleetv1alpha1.RolePrimary, "db-11": dbfleetv1alpha1.RoleReplica}},
		{name: "the ordinal named", role: dbfleetv1alpha1.RolePrimary, primary: ptr.To[int32](11),
			want: map[string]dbfleetv1alpha1.ReplicaRole{"db-10": dbfleetv1alpha1.RoleReplica, "db-11": dbfleetv1alpha1.RolePrimary}},
		{name: "the ordinal named, fenced", role: dbfleetv1alpha1.RolePrimary, primary: ptr.To[int32](11), fenced: true,
			want: map[string]dbfleetv1alpha1.ReplicaRole{"db-10": dbfleetv1alpha1.RoleReplica, "db-11": dbfleetv1alpha1.RoleFenced}},
		{name: "a replica share has no primary", role: dbfleetv1alpha1.RoleReplica,
			want: map[string]dbfleetv1alpha1.ReplicaRole{"db-10": dbfleetv1alpha1.RoleReplica, "db-11": dbfleetv1alpha1.RoleReplica}},
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
