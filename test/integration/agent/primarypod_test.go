package agent

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// A replica share of two is promoted with its higher ordinal as the primary pod
// (spec.primaryOrdinal, the instance the hub found furthest in the WAL): that pod, not the
// lowest ordinal, is labelled primary, gets the standbys it keeps slots for, and is the one the
// primary budget covers; the lowest ordinal becomes its standby and follows it.
func TestPromotedShareMakesItsNamedPodThePrimary(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 10, dbfleetv1alpha1.RoleReplica)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.runInstancePod(sts, 10, newInstanceServer(t, `{"pod":"orders-10","role":"standby","epoch":1,"timeline":1,"receivedLSN":"0/5000000","replayedLSN":"0/5000000","streaming":true,"ready":true}`))
	s.runInstancePod(sts, 11, newInstanceServer(t, `{"pod":"orders-11","role":"standby","epoch":1,"timeline":1,"receivedLSN":"0/7000000","replayedLSN":"0/7000000","streaming":true,"ready":true}`))
	s.eventually("both pods replicas at epoch 1", func() bool {
		return s.podRole("orders-10") == "replica" && s.podRole("orders-11") == "replica" &&
			s.podAnnotation("orders-10", contract.AnnotationEpoch) == "1" && s.podAnnotation("orders-11", contract.AnnotationEpoch) == "1"
	})

	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.Role, m.Spec.Epoch, m.Spec.PrimaryOrdinal = dbfleetv1alpha1.RolePrimary, 2, ptr.To[int32](11)
	})
	s.eventually("orders-11 primary at epoch 2, orders-10 its standby", func() bool {
		return s.podRole("orders-11") == "primary" && s.podRole("orders-10") == "replica" &&
			s.podAnnotation("orders-11", contract.AnnotationEpoch) == "2" && s.podAnnotation("orders-10", contract.AnnotationEpoch) == "2" &&
			s.podAnnotation("orders-11", contract.AnnotationStandbys) == "orders-10" &&
			s.podAnnotation("orders-10", contract.AnnotationPrimaryEndpoint) != ""
	})
	if got := s.podAnnotation("orders-10", contract.AnnotationStandbys); got != "" {
		t.Errorf("orders-10, a standby, keeps slots for %q", got)
	}

	pdb := &policyv1.PodDisruptionBudget{}
	s.eventually("the primary budget", func() bool {
		return east.Client.Get(s.ctx, s.key(specs.PrimaryPDBName(s.db)), pdb) == nil
	})
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for pod, want := range map[string]bool{"orders-11": true, "orders-10": false} {
		p := &corev1.Pod{}
		if err := east.Client.Get(s.ctx, s.key(pod), p); err != nil {
			t.Fatal(err)
		}
		if got := sel.Matches(labels.Set(p.Labels)); got != want {
			t.Errorf("primary budget selects %s: %v, want %v", pod, got, want)
		}
	}
}

// The API server keeps spec.primaryOrdinal to one of the share's pods, and to a primary share.
func TestPrimaryOrdinalMustBeOneOfTheSharesPods(t *testing.T) {
	s := newShare(t, 2, 10, dbfleetv1alpha1.RolePrimary, func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.PrimaryOrdinal = ptr.To[int32](11) })
	for _, tc := range []struct {
		name   string
		change func(*dbfleetv1alpha1.MemberDatabase)
		want   string
	}{
		{"past the share's pods", func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.PrimaryOrdinal = ptr.To[int32](12) }, "primaryOrdinal must be one of the share's ordinals"},
		{"below the share's pods", func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.PrimaryOrdinal = ptr.To[int32](9) }, "primaryOrdinal must be one of the share's ordinals"},
		{"a scale-down that would drop it", func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Replicas = 1 }, "primaryOrdinal must be one of the share's ordinals"},
		{"on a replica share", func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Role = dbfleetv1alpha1.RoleReplica }, "only a primary share names a primaryOrdinal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mdb := &dbfleetv1alpha1.MemberDatabase{}
			if err := hub.Client.Get(s.ctx, client.ObjectKeyFromObject(s.mdb), mdb); err != nil {
				t.Fatal(err)
			}
			tc.change(mdb)
			err := hub.Client.Update(s.ctx, mdb)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("update: %v, want refused with %q", err, tc.want)
			}
		})
	}
}
