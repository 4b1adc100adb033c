package agent

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// TestPostgresPodsPassTheRestrictedPodSecurityLevel: a postgres share's pod, as its StatefulSet
// would create it, is admitted by the member's API server in a namespace that enforces the
// restricted Pod Security Standard (the PodSecurity admission plugin, on by default), runs as
// spec.postgres.uid, and has a read-only root file system.
func TestPostgresPodsPassTheRestrictedPodSecurityLevel(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary, func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.Database.Postgres = &dbfleetv1alpha1.PostgresSpec{UID: ptr.To[int64](70), GID: ptr.To[int64](70)} // an Alpine image's postgres
	})
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}
	s.waitObject(ns)
	patch := client.MergeFrom(ns.DeepCopy())
	ns.Labels = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}
	if err := east.Client.Patch(s.ctx, ns, patch); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db + "-0", Labels: sts.Spec.Template.Labels},
		Spec:       sts.Spec.Template.Spec,
	}
	for _, claim := range sts.Spec.VolumeClaimTemplates { // as the StatefulSet controller adds them
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: claim.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name + "-" + pod.Name}}})
	}
	if err := east.Client.Create(s.ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("the restricted level refuses the share's pod: %v", err)
	}

	sc := pod.Spec.SecurityContext
	if sc == nil || ptr.Deref(sc.RunAsUser, 0) != 70 || ptr.Deref(sc.RunAsGroup, 0) != 70 || ptr.Deref(sc.FSGroup, 0) != 70 {
		t.Errorf("pod security context %+v, want user, group and fsGroup 70", sc)
	}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if c.SecurityContext == nil || !ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) {
			t.Errorf("container %s: root file system writable", c.Name)
		}
	}
}
