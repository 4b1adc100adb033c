package agent

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/agent/member"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// A primary pod that stops answering while its agent keeps the hub (its node lost, say): the
// agent counts it lost after --primary-lost-after, carries no hub renewal into its primary Lease
// from then on, and fences the share (Fenced=True, PrimaryLost) only once the Lease it last wrote
// has certainly run out, never before. Handed the next epoch with the other pod as primary, it
// makes that pod the primary under a Lease of the new epoch.
func TestAgentFencesALostPrimaryOnceItsLeaseHasRunOut(t *testing.T) {
	const fenceAfter = 15 * time.Second
	clock := clocktesting.NewFakeClock(time.Now())
	guard := fence.NewGuard(clock, fenceAfter)
	guard.Renewed(clock.Now())
	startAgentWithImage(t, hub.Config, east.Config, guard, "example.com/dbfleet/agent:test")

	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	primary := newInstanceServer(t, fmt.Sprintf(`{"pod":"%s-0","role":"primary","epoch":1,"promotedEpoch":1,"ready":true}`, s.db))
	standby := newInstanceServer(t, fmt.Sprintf(`{"pod":"%s-1","role":"standby","epoch":1,"ready":true,"streaming":true,"primarySilenceSeconds":0}`, s.db))
	s.runInstancePod(sts, 0, primary)
	s.runInstancePod(sts, 1, standby)
	s.eventually("primary Lease held", func() bool { l := s.primaryLease(); return l != nil && *l.Spec.HolderIdentity == clusterName+"/1" })
	s.eventually("the primary read serving", func() bool { return primary.reads.Load() > 0 })

	// The primary's pod stops answering; the hub stays fresh, renewal after renewal.
	primary.Close()
	lostAt := clock.Now()
	var lastRenewal time.Time
	var fencedAt time.Time
	for clock.Now().Before(lostAt.Add(member.DefaultPrimaryLostAfter + 2*fenceAfter)) {
		clock.Step(time.Second)
		guard.Renewed(clock.Now())
		read := standby.reads.Load()
		s.touch(nil)
		s.eventually("a pass", func() bool { return standby.reads.Load() > read })
		if l := s.primaryLease(); l != nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(lastRenewal) {
			lastRenewal = l.Spec.RenewTime.Time
		}
		got := s.waitMDB("reported", func(*dbfleetv1alpha1.MemberDatabase) bool { return true })
		if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionFenced); c != nil && c.Status == metav1.ConditionTrue {
			if c.Reason != dbfleetv1alpha1.ReasonPrimaryLost {
				t.Fatalf("fenced for %s (%s), want %s", c.Reason, c.Message, dbfleetv1alpha1.ReasonPrimaryLost)
			}
			fencedAt = clock.Now()
			break
		}
	}
	if fencedAt.IsZero() {
		t.Fatalf("the share was not fenced within %s of its primary's loss", member.DefaultPrimaryLostAfter+2*fenceAfter)
	}
	// Renewals went on until the loss was counted, then stopped: the last one the Lease carries
	// is no later than the count (a pass a second), and the fence came after it ran out.
	if limit := lostAt.Add(member.DefaultPrimaryLostAfter + time.Second); lastRenewal.After(limit) {
		t.Errorf("the Lease carried a renewal of %s, %s after the primary stopped answering: past the %s allowance",
			lastRenewal.Format(time.RFC3339Nano), lastRenewal.Sub(lostAt), member.DefaultPrimaryLostAfter)
	}
	if runOut := lastRenewal.Add(time.Duration(fence.SecondsDown(fenceAfter))*time.Second + contract.MaxClockSkew); fencedAt.Before(runOut) {
		t.Errorf("fenced at %s, before the Lease it last renewed ran out (%s)", fencedAt.Format(time.RFC3339Nano), runOut.Format(time.RFC3339Nano))
	}
	t.Logf("primary lost at +0s; last renewal carried at %+.0fs; fenced at %+.0fs", lastRenewal.Sub(lostAt).Seconds(), fencedAt.Sub(lostAt).Seconds())
	cur := &appsv1.StatefulSet{}
	s.eventually("the StatefulSet fenced at epoch 1", func() bool {
		return east.Client.Get(s.ctx, client.ObjectKeyFromObject(sts), cur) == nil && cur.Annotations[specs.AnnotationFencedEpoch] == "1"
	})

	// The hub promotes the other pod at epoch 2.
	standby.set(fmt.Sprintf(`{"pod":"%s-1","role":"primary","epoch":2,"promotedEpoch":2,"ready":true}`, s.db))
	s.touch(func(m *dbfleetv1alpha1.MemberDatabase) { m.Spec.Epoch, m.Spec.PrimaryOrdinal = 2, ptr.To[int32](1) })
	s.eventually("pod 1 the primary under a Lease of epoch 2", func() bool {
		l := s.primaryLease()
		return s.podRole(s.db+"-1") == contract.PodRolePrimary && l != nil && *l.Spec.HolderIdentity == clusterName+"/2"
	})
}
