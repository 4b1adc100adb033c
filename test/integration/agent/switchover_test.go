package agent

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// A switchover's two tokens cross the agent: the promotion token of the new primary's share
// (spec.promoteAfterLSN) reaches its pods with their epoch, and a former primary's demotion token
// (the final LSN in its /status) reaches status.instances[].demoted, where the hub reads it.
func TestSwitchoverTokensCrossTheAgent(t *testing.T) {
	startAgentWithImage(t, hub.Config, east.Config, nil, "example.com/dbfleet/agent:test")
	s := newShare(t, 2, 0, dbfleetv1alpha1.RolePrimary, func(m *dbfleetv1alpha1.MemberDatabase) {
		m.Spec.PromoteAfterLSN = "0/30199A8"
	})
	sts := s.waitSTS("StatefulSet", func(*appsv1.StatefulSet) bool { return true })
	s.runInstancePod(sts, 0, newInstanceServer(t, `{"pod":"orders-0","role":"primary","epoch":1,"timeline":2,"ready":true}`))
	s.runInstancePod(sts, 1, newInstanceServer(t, `{"pod":"orders-1","role":"fenced","epoch":1,"promotedEpoch":1,
		"demoted":{"epoch":1,"finalLSN":"0/2000158","timeline":1}}`))

	s.eventually("the promotion token on both pods, with the epoch", func() bool {
		for _, pod := range []string{"orders-0", "orders-1"} {
			if s.podAnnotation(pod, contract.AnnotationPromoteAfterLSN) != "0/30199A8" || s.podAnnotation(pod, contract.AnnotationEpoch) != "1" {
				return false
			}
		}
		return true
	})
	s.waitMDB("the former primary's final LSN reported", func(m *dbfleetv1alpha1.MemberDatabase) bool {
		for _, in := range m.Status.Instances {
			if in.Pod == "orders-1" && in.Demoted != nil && in.Demoted.Epoch == 1 && in.Demoted.FinalLSN == "0/2000158" && in.Demoted.Timeline == 1 {
				return true
			}
		}
		return false
	})
}
