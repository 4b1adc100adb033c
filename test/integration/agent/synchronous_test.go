package agent

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// A synchronous share tells every pod (so a pod never runs as primary at an epoch without it)
// the durability and number, and the other clusters' pods it counts (spec.standbys, not its own
// standbys); the primary's report of what it runs reaches status.instances[].
func TestSynchronousShareAnnotatesItsPodsAndReportsThePrimarysQuorum(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary, func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.Standbys = []string{"orders-6", "orders-5"}
		m.Spec.Database.Postgres = &dbfleetv1alpha1.PostgresSpec{Synchronous: &dbfleetv1alpha1.SynchronousReplication{
			Number: 1, DataDurability: dbfleetv1alpha1.DataDurabilityPreferred}}
	})
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.runInstancePod(sts, 0, newInstanceServer(t, `{"pod":"orders-0","role":"primary","epoch":1,"timeline":1,"ready":true,
		"synchronous":{"durability":"preferred","wanted":1,"number":1,"standbyNames":"ANY 1 (\"orders-5\", \"orders-6\")","standbys":["orders-5","orders-6"],"synchronous":["orders-5"]},
		"replication":[{"pod":"orders-1","state":"streaming","syncState":"async"},{"pod":"orders-5","state":"streaming","syncState":"quorum","flushLSN":"0/3000060"}]}`))
	s.runInstancePod(sts, 1, newInstanceServer(t, `{"pod":"orders-1","role":"standby","epoch":1,"timeline":1,"streaming":true,"ready":true}`))

	s.eventually("synchronous annotations on both pods", func() bool {
		for _, pod := range []string{"orders-0", "orders-1"} {
			if s.podAnnotation(pod, contract.AnnotationSynchronous) != "preferred 1" ||
				s.podAnnotation(pod, contract.AnnotationSynchronousStandbys) != "orders-5,orders-6" {
				return false
			}
		}
		return true
	})
	got := s.waitMDB("the primary's synchronous replication reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		for _, in := range m.Status.Instances {
			if in.Pod == "orders-0" && in.Synchronous != nil && len(in.Replication) == 2 {
				return true
			}
		}
		return false
	})
	for _, in := range got.Status.Instances {
		if in.Pod != "orders-0" {
			continue
		}
		if sync := in.Synchronous; sync.Number != 1 || len(sync.Synchronous) != 1 || sync.Synchronous[0] != "orders-5" {
			t.Errorf("synchronous %+v, want number 1 with orders-5 confirming", sync)
		}
		if r := in.Replication[1]; r.Pod != "orders-5" || r.SyncState != "quorum" || r.FlushLSN != "0/3000060" {
			t.Errorf("replication %+v, want orders-5 in quorum at 0/3000060", in.Replication)
		}
	}
}
