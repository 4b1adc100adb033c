package agent

import (
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// leaseWritesRefused answers the agent's Lease writes, while refuse is set, as a member API server
// that is down answers them: connection refused. The agent then knows the write never landed and
// judges the lapse from the last renewal that did, as when its member API server stops. Any other
// failure, a 403 from RBAC included, counts as a renewal the Lease may carry: the lapse would
// move on with every hub renewal and never come while the hub lease is fresh.
type leaseWritesRefused struct {
	next   http.RoundTripper
	refuse *atomic.Bool
}

func (l leaseWritesRefused) RoundTrip(req *http.Request) (*http.Response, error) {
	if l.refuse.Load() && req.Method != http.MethodGet && strings.HasPrefix(req.URL.Path, "/apis/coordination.k8s.io/") {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	}
	return l.next.RoundTrip(req)
}

// A share fenced because its primary Lease lapsed is forgotten with it: the same database deleted
// and re-created under the same name starts again at epoch 1, and the agent does not hold the old
// share's lapse against it.
func TestARecreatedShareIsNotFencedForAnEarlierLapse(t *testing.T) {
	const fenceAfter = 15 * time.Second
	var refuse atomic.Bool
	cfg := rest.CopyConfig(agentMemberConfig(t, "agent-lapse", nil))
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return leaseWritesRefused{next: rt, refuse: &refuse} })
	clock := clocktesting.NewFakeClock(time.Now())
	guard := fence.NewGuard(clock, fenceAfter)
	guard.Renewed(clock.Now())
	startAgentWithGuard(t, hub.Config, cfg, guard)

	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	heldFrom := func(renewed time.Time) func() bool {
		return func() bool {
			l := s.primaryLease()
			return l != nil && *l.Spec.HolderIdentity == clusterName+"/1" && l.Spec.RenewTime.Time.Equal(renewed.Truncate(time.Microsecond))
		}
	}
	s.eventually("primary Lease held at epoch 1", heldFrom(guard.LastRenewStart()))

	// The Lease can no longer be renewed while the hub lease stays fresh: once the last renewal
	// that landed plus the Lease's duration and the instances' clock skew allowance has passed,
	// the agent fences the share for its lapse.
	refuse.Store(true)
	lapse := guard.LastRenewStart().Add(time.Duration(fence.SecondsDown(fenceAfter))*time.Second + contract.MaxClockSkew)
	for clock.Now().Before(lapse) {
		clock.Step(5 * time.Second) // less than fenceAfter: the hub lease never goes stale
		guard.Renewed(clock.Now())
	}
	s.touch(nil)
	s.waitMDB("fenced for the lapse", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, dbfleetv1alpha1.ConditionFenced)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == dbfleetv1alpha1.ReasonPrimaryLeaseLapsed
	})

	// The member answers again; the database is deleted and re-created under the same name.
	refuse.Store(false)
	if err := hub.Client.Delete(s.ctx, s.mdb); err != nil {
		t.Fatal(err)
	}
	waitGone(t, hub.Client, s.mdb)
	waitGone(t, east.Client, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.db}})
	again := &dbfleetv1alpha1.MemberDatabase{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.mdb.Namespace, Name: s.mdb.Name, Labels: s.mdb.Labels},
		Spec:       *s.mdb.Spec.DeepCopy(),
	}
	again.Spec.DatabaseRef.UID, again.Spec.Epoch = "uid-2", 1
	if err := hub.Client.Create(s.ctx, again); err != nil {
		t.Fatal(err)
	}
	s.mdb = again

	got := s.waitMDB("the new share reported at epoch 1", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return m.Status.Epoch == 1 && m.Status.ObservedGeneration == m.Generation
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, dbfleetv1alpha1.ConditionFenced); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("the re-created share is fenced (%s): %s", c.Reason, c.Message)
	}
	if sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true }); sts.Annotations[specs.AnnotationFencedEpoch] != "" {
		t.Errorf("the re-created share's StatefulSet carries fenced epoch %s", sts.Annotations[specs.AnnotationFencedEpoch])
	}
	s.eventually("primary Lease held at epoch 1 by the new share", heldFrom(guard.LastRenewStart()))
}
