package agent

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// A share's own status report does not bring it back: the instances' WAL positions move with
// every write (and with the instance manager's write check, twice a second), so every pass
// reports something new, and when the agent watched its own reports each one started the next
// pass at once: passes as fast as the machine allowed, each applying the share's objects and
// reading its credentials on the hub (on the 2-core machine, four databases kept four API
// servers busy and the load average at 55 before any client wrote). An Available share is
// looked at again every 5 s (instanceRecheck); the window allows six times that.
func TestAStatusReportDoesNotBringItsShareBack(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 1, 0, dbfleetv1alpha1.RolePrimary)
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	var reads atomic.Int64
	srv := newTLSInstanceServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			http.NotFound(w, r)
			return
		}
		n := reads.Add(1)
		// Every read a WAL position further on: a primary taking writes.
		_, _ = fmt.Fprintf(w, `{"pod":"orders-0","role":"primary","epoch":1,"timeline":1,"receivedLSN":"0/%X","replayedLSN":"0/%X","ready":true}`, 0x3000000+n*0x100, 0x3000000+n*0x100)
	}))
	s.runInstancePod(sts, 0, &instanceServer{Server: srv})
	s.setStatefulSetStatus(1)
	s.waitMDB("Available", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		return condition(m, dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue)
	})

	// An observation window, not a wait for a condition: how many passes read the instance in it.
	const window = 6 * time.Second
	from := reads.Load()
	time.Sleep(window)
	passes := reads.Load() - from
	if limit := int64(window / time.Second); passes > limit {
		t.Errorf("the share's instance was read %d times in %s, want at most %d (a pass every 5 s): its own reports bring it back", passes, window, limit)
	}
	t.Logf("%d passes in %s", passes, window)
}
