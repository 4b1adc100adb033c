package specs

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// postgresIDs are the user and group a postgres database's pods run as: spec.postgres.uid and
// gid, else the official images' postgres user.
func postgresIDs(db *dbfleetv1alpha1.DatabaseTemplate) (uid, gid int64) {
	uid, gid = dbfleetv1alpha1.DefaultPostgresID, dbfleetv1alpha1.DefaultPostgresID
	if pg := db.Postgres; pg != nil {
		if pg.UID != nil {
			uid = *pg.UID
		}
		if pg.GID != nil {
			gid = *pg.GID
		}
	}
	return uid, gid
}

// restrictedPod is the security context of a postgres pod, which passes the restricted Pod
// Security Standard: never root, the runtime's default seccomp profile, and its volumes given to
// its group (fsGroup; checked only at their root, so a large volume is not walked on every start).
// The instance manager, running as that user, runs postgres as itself.
func restrictedPod(uid, gid int64) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To(uid),
		RunAsGroup:          ptr.To(gid),
		FSGroup:             ptr.To(gid),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// restrictedContainer is the security context of each container of a postgres pod: no
// capabilities, no privilege escalation, and a read-only root file system (postgres writes only
// to its data volume: no unix socket, and /dev/shm is the runtime's tmpfs; the instance manager
// comes in an emptyDir).
func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
}
