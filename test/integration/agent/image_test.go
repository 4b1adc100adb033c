package agent

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// A version the member has no image for: the kubelet reports the pod's container waiting on
// ErrImagePull, and the share says so (Degraded and Available False, ImagePullFailed) naming the
// pod, the container and the image, instead of "0/1 replicas ready".
func TestShareReportsAnImageItCannotPull(t *testing.T) {
	startAgent(t, hub.Config, east.Config)
	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.createPods(sts, 0)
	s.setStatefulSetStatus(0)
	s.waitMDB("reported without the image problem", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
		return c != nil && c.Reason == dbfleetv1alpha1.ReasonReplicasNotReady
	})

	// What a kubelet writes when the image does not exist.
	pod := &corev1.Pod{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := east.Client.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: s.db + "-0"}, pod); err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodPending
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: "database", Image: "postgres:99.1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ErrImagePull", Message: `failed to pull and unpack image "docker.io/library/postgres:99.1": not found`}},
		}}
		return east.Client.Status().Update(s.ctx, pod)
	}); err != nil {
		t.Fatal(err)
	}

	got := s.waitMDB("ImagePullFailed", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return meta.IsStatusConditionTrue(m.Status.Conditions, dbfleetv1alpha1.ConditionDegraded) &&
			meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionDegraded).Reason == dbfleetv1alpha1.ReasonImagePullFailed
	})
	for _, typ := range []string{dbfleetv1alpha1.ConditionDegraded, dbfleetv1alpha1.ConditionAvailable} {
		c := meta.FindStatusCondition(got.Status.Conditions, typ)
		want := []string{"pod " + s.db + "-0", "container database", `"postgres:99.1"`, "ErrImagePull", "not found"}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				t.Errorf("%s message %q does not say %s", typ, c.Message, w)
			}
		}
		if typ == dbfleetv1alpha1.ConditionAvailable && (c.Status != metav1.ConditionFalse || c.Reason != dbfleetv1alpha1.ReasonImagePullFailed) {
			t.Errorf("Available = %s %s, want False %s", c.Status, c.Reason, dbfleetv1alpha1.ReasonImagePullFailed)
		}
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionApplied); c.Status != metav1.ConditionTrue {
		t.Errorf("Applied = %s %s: the share is applied as asked, only its image is missing", c.Status, c.Reason)
	}

	// The image is fixed (the kubelet pulls it, the container runs): the problem goes.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := east.Client.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: s.db + "-0"}, pod); err != nil {
			return err
		}
		pod.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		return east.Client.Status().Update(s.ctx, pod)
	}); err != nil {
		t.Fatal(err)
	}
	s.waitMDB("no longer degraded", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return meta.IsStatusConditionFalse(m.Status.Conditions, dbfleetv1alpha1.ConditionDegraded)
	})
}
