package agent

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// An agent that loses the hub does not fence a primary whose instance answers, at the agent's
// deadline, that it hears every standby: it takes writes on its failsafe, or will the moment its
// Lease runs out (the agent's deadline and the Lease's fall together; in the end-to-end suite the
// agent asked first and fenced). Relabelling the pod fenced would stop the very writes the
// failsafe keeps going. The share reports the failsafe. Once the instance says a standby is
// unheard, the agent fences as before.
func TestAgentDoesNotFenceAPrimaryOnItsFailsafe(t *testing.T) {
	const fenceAfter = 15 * time.Second
	clock := clocktesting.NewFakeClock(time.Now())
	guard := fence.NewGuard(clock, fenceAfter)
	guard.Renewed(clock.Now())
	startAgentWithImage(t, hub.Config, east.Config, guard, "example.com/dbfleet/agent:test")

	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	status := func(active bool, unheard string) string {
		return fmt.Sprintf(`{"pod":"%s-0","role":"primary","epoch":1,"promotedEpoch":1,"ready":true,"failsafe":{"active":%t,"members":["%s-1"],"unheard":[%s]}}`,
			s.db, active, s.db, unheard)
	}
	primary := newInstanceServer(t, status(false, ""))
	standby := newInstanceServer(t, fmt.Sprintf(`{"pod":"%s-1","role":"standby","epoch":1,"ready":true,"streaming":true,"primarySilenceSeconds":0}`, s.db))
	s.runInstancePod(sts, 0, primary)
	s.runInstancePod(sts, 1, standby)
	s.eventually("primary labelled", func() bool { return s.podRole(s.db+"-0") == contract.PodRolePrimary })

	// The hub goes silent. At the agent's deadline the instance's Lease has not quite run out,
	// but it hears its standby: its failsafe will take over.
	clock.Step(fenceAfter + time.Second)
	s.touch(nil)
	read := primary.reads.Load()
	s.eventually("passes past the deadline, the Lease not yet out", func() bool { return primary.reads.Load() >= read+3 })
	if role := s.podRole(s.db + "-0"); role != contract.PodRolePrimary {
		t.Fatalf("a primary that hears every standby was fenced at the agent's deadline: pod role %s", role)
	}

	// Its Lease runs out and it turns to its failsafe.
	primary.set(status(true, ""))
	s.touch(nil)
	got := s.waitMDB("the failsafe reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		for _, in := range m.Status.Instances {
			if in.Pod == s.db+"-0" && in.Failsafe != nil && in.Failsafe.Active && m.Labels["touched"] != "" {
				return true
			}
		}
		return false
	})
	// Several passes, each reading the primary, each of which would have fenced.
	read = primary.reads.Load()
	s.eventually("passes past the deadline", func() bool { return primary.reads.Load() >= read+6 })
	cur := &appsv1.StatefulSet{}
	if err := east.Client.Get(s.ctx, client.ObjectKeyFromObject(sts), cur); err != nil {
		t.Fatal(err)
	}
	if role := s.podRole(s.db + "-0"); role != contract.PodRolePrimary || cur.Annotations[specs.AnnotationFencedEpoch] != "" ||
		condition(got, dbfleetv1alpha1.ConditionFenced, metav1.ConditionTrue) {
		t.Fatalf("a primary on its failsafe was fenced: pod role %s, fenced epoch %q", role, cur.Annotations[specs.AnnotationFencedEpoch])
	}

	// Its standby fell silent: the instance is no longer on its failsafe. The agent fences.
	primary.set(status(false, fmt.Sprintf("%q", s.db+"-1")))
	s.touch(nil)
	s.eventually("fenced", func() bool {
		_ = east.Client.Get(s.ctx, client.ObjectKeyFromObject(sts), cur)
		return s.podRole(s.db+"-0") == contract.PodRoleFenced && cur.Annotations[specs.AnnotationFencedEpoch] == "1"
	})
}

// The member API server refuses the agent's Lease writes (down, as far as the Lease goes) while
// the hub stays reachable: the Lease lapses, but the primary answers that it is on its failsafe,
// so the agent neither fences it nor records the lapse, pass after pass; once the instance is no
// longer on it, the agent fences the share for the lapse as before.
func TestAgentDoesNotFenceAFailsafePrimaryForALapsedLease(t *testing.T) {
	const fenceAfter = 15 * time.Second
	var refuse atomic.Bool
	cfg := rest.CopyConfig(agentMemberConfig(t, "agent-failsafe-lapse", nil))
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return leaseWritesRefused{next: rt, refuse: &refuse} })
	clock := clocktesting.NewFakeClock(time.Now())
	guard := fence.NewGuard(clock, fenceAfter)
	guard.Renewed(clock.Now())
	startAgentWithImage(t, hub.Config, cfg, guard, "example.com/dbfleet/agent:test")

	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	status := func(active bool, unheard string) string {
		return fmt.Sprintf(`{"pod":"%s-0","role":"primary","epoch":1,"promotedEpoch":1,"ready":true,"failsafe":{"active":%t,"members":["%s-1"],"unheard":[%s]}}`,
			s.db, active, s.db, unheard)
	}
	primary := newInstanceServer(t, status(true, ""))
	standby := newInstanceServer(t, fmt.Sprintf(`{"pod":"%s-1","role":"standby","epoch":1,"ready":true,"streaming":true,"primarySilenceSeconds":0}`, s.db))
	s.runInstancePod(sts, 0, primary)
	s.runInstancePod(sts, 1, standby)
	s.eventually("primary Lease held", func() bool { l := s.primaryLease(); return l != nil && *l.Spec.HolderIdentity == clusterName+"/1" })

	refuse.Store(true)
	lapse := guard.LastRenewStart().Add(time.Duration(fence.SecondsDown(fenceAfter))*time.Second + contract.MaxClockSkew)
	for clock.Now().Before(lapse.Add(10 * time.Second)) {
		clock.Step(5 * time.Second) // the hub lease stays fresh
		guard.Renewed(clock.Now())
		s.touch(nil)
	}
	// Passes after the lapse, each reading the primary: it would have been fenced by the first.
	read := primary.reads.Load()
	s.eventually("passes after the lapse", func() bool { return primary.reads.Load() >= read+6 })
	got := s.waitMDB("reported", func(*dbfleetv1alpha1.MemberDatabase) bool { return true })
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionFenced); (c != nil && c.Status == metav1.ConditionTrue) ||
		s.podRole(s.db+"-0") != contract.PodRolePrimary {
		t.Fatalf("a primary on its failsafe was fenced for its lapsed Lease: Fenced %+v, pod role %s", c, s.podRole(s.db+"-0"))
	}

	primary.set(status(false, fmt.Sprintf("%q", s.db+"-1")))
	s.touch(nil)
	s.waitMDB("fenced for the lapse", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionFenced)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == dbfleetv1alpha1.ReasonPrimaryLeaseLapsed
	})
}
