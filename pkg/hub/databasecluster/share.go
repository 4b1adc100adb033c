package databasecluster

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// share is what the hub reads of one cluster's share of the database: its MemberDatabase, spec
// (what the hub asked) and status (what the agent and the share's instances reported). A cluster
// without a MemberDatabase reads as a share with nothing in it.
type share struct {
	mdb *dbfleetv1alpha1.MemberDatabase
}

// shareOf reads mdb, which may be nil, as a share.
func shareOf(mdb *dbfleetv1alpha1.MemberDatabase) share { return share{mdb} }

// shareOn is the share of the database on cluster.
func (s *scope) shareOn(cluster string) share { return shareOf(s.memberDBs[cluster]) }

// reportsInstances says the share's instances report (they run the instance manager).
func (sh share) reportsInstances() bool { return sh.mdb != nil && len(sh.mdb.Status.Instances) > 0 }

// condition is the share's condition of type t, nil when it has none.
func (sh share) condition(t string) *metav1.Condition {
	if sh.mdb == nil {
		return nil
	}
	return meta.FindStatusCondition(sh.mdb.Status.Conditions, t)
}

// instance is pod's report in the share, nil when it has none.
func (sh share) instance(pod string) *dbfleetv1alpha1.InstanceStatus {
	if sh.mdb == nil {
		return nil
	}
	for i := range sh.mdb.Status.Instances {
		if sh.mdb.Status.Instances[i].Pod == pod {
			return &sh.mdb.Status.Instances[i]
		}
	}
	return nil
}

// progress is how far in the WAL pod's instance says it is; false when it reported no position.
func (sh share) progress(pod string) (placement.WALProgress, bool) {
	in := sh.instance(pod)
	if in == nil {
		return placement.WALProgress{}, false
	}
	return scheduling.InstanceProgress(*in)
}

// runsPrimary says pod's instance runs as primary: a planned move off it stops a primary that
// takes writes.
func (sh share) runsPrimary(pod string) bool {
	in := sh.instance(pod)
	return in != nil && in.Role == dbfleetv1alpha1.InstanceRunningPrimary
}

// takesWrites says the primary's pod reports itself running as primary at the primary's epoch
// or later. A share without instance reports (no instance manager) is judged by its pods'
// readiness alone; in a share with them, a pod missing from them is not known to take writes.
func (sh share) takesWrites(primary *dbfleetv1alpha1.PrimaryStatus) bool {
	if primary == nil || primary.Pod == "" || !sh.reportsInstances() {
		return true
	}
	in := sh.instance(primary.Pod)
	return in != nil && in.Role == dbfleetv1alpha1.InstanceRunningPrimary && (in.Epoch == 0 || in.Epoch >= primary.Epoch)
}

// demoting says the share was already written as a replica at epoch or later: the demotion has
// begun and goes on, whatever the target does now.
func (sh share) demoting(epoch int64) bool {
	return sh.mdb != nil && sh.mdb.Spec.Role == dbfleetv1alpha1.RoleReplica && sh.mdb.Spec.Epoch >= epoch
}

// demoted says the share's agent has applied a replica role at epoch or later (it releases the
// primary Lease before it reports the epoch). No MemberDatabase: nothing to demote.
func (sh share) demoted(epoch int64) bool {
	if sh.mdb == nil {
		return true
	}
	return sh.demoting(epoch) && sh.mdb.Status.Epoch >= epoch && sh.mdb.Status.ObservedGeneration >= sh.mdb.Generation
}

// finalLSN is the demotion token of a planned move: where the WAL of the old primary, primary at
// epoch on this share, ended when it stopped (its shutdown checkpoint, which its instance
// reports in status.instances[].demoted once its agent has demoted it). A share without instance
// reports (no instance manager) has no WAL to hand over: it returns "", "". Otherwise, while no
// instance reports a final LSN for that epoch, it returns "" and what the hub waits for.
func (sh share) finalLSN(epoch int64) (string, string) {
	if !sh.reportsInstances() {
		return "", ""
	}
	var best string
	var bestAt contract.LSN
	var unclean []string
	for _, in := range sh.mdb.Status.Instances {
		d := in.Demoted
		if d == nil || d.Epoch != epoch {
			continue
		}
		if d.FinalLSN == "" {
			unclean = append(unclean, in.Pod+": "+d.Message)
			continue
		}
		if at, err := contract.ParseLSN(d.FinalLSN); err == nil && (best == "" || at > bestAt) {
			best, bestAt = d.FinalLSN, at
		}
	}
	if best != "" {
		return best, ""
	}
	waiting := "waiting for its instance to report its final LSN (its shutdown checkpoint)"
	if len(unclean) > 0 {
		waiting += "; " + strings.Join(unclean, "; ")
	}
	return "", waiting
}

// unpromotedToken is the promotion token for a planned move off a primary that never ran as
// one: a switchover's target (status.primary.promoteAfterLSN set) whose instances report, from
// the share at next or later, that they act on that epoch or a later one and were never promoted
// at the primary's epoch. It took no write, so the WAL still ends at the LSN it was handed,
// which the old primary holds. The second return says whether that is so; without proof (an
// instance that does not report its epochs, or one promoted at that epoch, whose final LSN then
// counts) it is false.
func (sh share) unpromotedToken(p *dbfleetv1alpha1.PrimaryStatus, next int64) (string, bool) {
	if p == nil || p.PromoteAfterLSN == "" || !sh.reportsInstances() || sh.mdb.Status.Epoch < next {
		return "", false
	}
	primaryReported := p.Pod == ""
	for _, in := range sh.mdb.Status.Instances {
		if in.PromotedEpoch >= p.Epoch || in.Role == dbfleetv1alpha1.InstanceRunningPrimary {
			return "", false
		}
		if p.Pod == "" || in.Pod == p.Pod {
			if in.Epoch < next {
				return "", false
			}
			primaryReported = true
		}
	}
	if !primaryReported {
		return "", false
	}
	return p.PromoteAfterLSN, true
}

// leaseLapsed says the share, the old primary's, reports that its primary Lease ran out
// unrenewed at the current primary epoch, applied at that epoch: Fenced=True, PrimaryLeaseLapsed
// (its agent could not reach the member API server) or PrimaryLost (its agent stopped renewing
// it, the primary pod having stopped serving).
func (sh share) leaseLapsed(p *dbfleetv1alpha1.PrimaryStatus) bool {
	return sh.fencedFor(p, dbfleetv1alpha1.ReasonPrimaryLeaseLapsed) || sh.primaryLost(p)
}

// fencedFor says the share, the primary's at p's epoch and applied at it, reports Fenced=True for
// reason.
func (sh share) fencedFor(p *dbfleetv1alpha1.PrimaryStatus, reason string) bool {
	if sh.mdb == nil || p == nil || sh.mdb.Spec.Epoch != p.Epoch || sh.mdb.Status.Epoch != p.Epoch || sh.mdb.Spec.Role != dbfleetv1alpha1.RolePrimary {
		return false
	}
	c := sh.condition(dbfleetv1alpha1.ConditionFenced)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}

// targetNotStreaming says why a planned switchover to pod in this share (on cluster to) must
// not demote the running primary yet, or "" when it may: the target must be a standby that
// streams from it, or it will not receive the WAL up to the old primary's final LSN and cannot
// promote. A share without instance reports (no instance manager) has no WAL to wait for.
func (sh share) targetNotStreaming(to, pod string) string {
	if !sh.reportsInstances() {
		return ""
	}
	in := sh.instance(pod)
	switch {
	case in == nil:
		return fmt.Sprintf("the switchover to %s waits for its instance %s to report", to, pod)
	case in.Role != dbfleetv1alpha1.InstanceRunningStandby || !in.Ready:
		msg := fmt.Sprintf("the switchover to %s waits until its instance %s streams from the primary (it reports role %s, ready %t", to, pod, in.Role, in.Ready)
		if in.Message != "" {
			msg += ": " + in.Message
		}
		return msg + "); the primary keeps taking writes meanwhile"
	}
	return ""
}

// degradedBecause is what a degraded share's agent says is wrong (", <Reason>: <message>" of its
// Degraded condition), so the DatabaseCluster names the cause (an image the member cannot pull,
// an object it cannot write) and not only the count of ready replicas.
func (sh share) degradedBecause() string {
	c := sh.condition(dbfleetv1alpha1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue {
		return ""
	}
	return ", " + c.Reason + ": " + truncate(c.Message)
}

// promotedPodAddress is, in the PodIP network mode, the address of the pod the hub made primary
// (the share's primary pod) while its share has not reported a read-write endpoint at the new
// epoch: the hub knows where the new primary will be the moment it promotes it, and the other
// clusters' standbys may follow it at once, streaming from it (cascading) while it replays and
// promotes, then on its new timeline. Waiting for the share's own report instead put the agent's
// next read of its instances, the report's batch and another reconcile between the promotion and
// the first standby streaming from the new primary, on which a synchronous primary's first
// commits wait. Only an instance that runs (as standby, or already as primary) is pointed at: a
// pod that has not started, or a fenced primary handed a new epoch, reports its endpoint when it
// serves. Other network modes name a Service or a load balancer, which exists only once the
// share runs as primary.
func (sh share) promotedPodAddress(pod string) string {
	if sh.mdb == nil || (sh.mdb.Spec.Network != "" && sh.mdb.Spec.Network != dbfleetv1alpha1.DatabaseNetworkPodIP) {
		return ""
	}
	if in := sh.instance(pod); in != nil && (in.Role == dbfleetv1alpha1.InstanceRunningStandby || in.Role == dbfleetv1alpha1.InstanceRunningPrimary) {
		return in.Address
	}
	return ""
}
