package databasecluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// primaryMove is a move of the primary that scheduling decided: from the cluster that holds it
// at the current epoch to another, promoted at the next. The placement that carries it is
// adopted only once every step of the move lets it go on; the first step that does not says why
// (a hold), and the placement in force stays, old primary included. Which steps a move takes
// depends on the old primary's cluster:
//
//   - Ready (a planned switchover, or a primary that cannot stay there: clock skew, a stuck
//     switchover target): taintsLiftedFirst, switchoverMayBegin, demoteFirst, handOverToken. The
//     old primary is demoted and stops cleanly; the new one replays past its final LSN before
//     it takes a write.
//   - not Ready, its share still placed (its taint tolerated): awaitEviction.
//   - not Ready and evicted, or Ready with its share fenced for a Lease that ran out unrenewed (a
//     lost primary pod: lostprimary.go), a failover: fencedFirst, synchronousFirst, silentFirst.
//     The old primary has certainly stopped writing (its Lease, then its failsafe), and with
//     dataDurability required the new one has every acknowledged commit.
type primaryMove struct {
	from, to string
	// current is the primary the move replaces; epoch is the one the new primary is promoted at.
	current *dbfleetv1alpha1.PrimaryStatus
	epoch   int64
	// promoted is the pod of to's share that becomes the primary pod.
	promoted primaryPodChoice
	// forced says the primary cannot stay on from (scheduling's NoPrimary), forcedBy why.
	forced   bool
	forcedBy string
	// stuckTarget says the current primary is a switchover target that can never replay up to
	// its promotion token (stuckSwitchoverTarget).
	stuckTarget bool

	// What handOverToken found: the promotion token, and where it came from when it is not the
	// old primary's own final LSN. retrySwitchover: the switchover that made the current primary
	// never took place, so it stays asked for (status.primary.preferred is cleared).
	token, tokenSource string
	retrySwitchover    bool
}

// hold is what a step says when the move may not go on yet.
type hold struct {
	// reason and message are FailoverInProgress's; a switchover that has not begun leaves the
	// condition alone and says why in pending (SwitchoverPending) instead.
	reason, message, pending string
	// wait is when to look again (zero: with the decision's own requeue).
	wait time.Duration
	// demote: the old primary's share is written as a replica at the new epoch meanwhile.
	demote bool
}

// why is the reason the primary cannot stay, for the messages.
func (m *primaryMove) why() string {
	if !m.forced {
		return ""
	}
	return fmt.Sprintf(" (it cannot stay there: %s)", m.forcedBy)
}

// gate runs the move's steps in order and returns the first hold; nil: the move may be applied.
func (r *Reconciler) gate(ctx context.Context, s *scope, m *primaryMove, planned *dbfleetv1alpha1.DatabaseCluster, now time.Time) *hold {
	switch {
	case !scheduling.ClusterReady(s.members[m.from]) && scheduling.PlacedOn(planned, m.from):
		return m.awaitEviction()
	case !scheduling.ClusterReady(s.members[m.from]) || s.shareOn(m.from).leaseLapsed(m.current):
		// A failover; on a Ready cluster too when the old primary's Lease ran out unrenewed (its
		// pod was lost, say): it stopped for certain and has no final LSN to hand over.
		if h := r.fencedFirst(ctx, s, m); h != nil {
			return h
		}
		if h := m.synchronousFirst(s); h != nil {
			return h
		}
		return m.silentFirst(s)
	default:
		if h := m.taintsLiftedFirst(s); h != nil {
			return h
		}
		if h := m.switchoverMayBegin(s, now); h != nil {
			return h
		}
		if h := m.demoteFirst(s); h != nil {
			return h
		}
		return m.handOverToken(s)
	}
}

// switchoverMayBegin holds a planned move that has not begun (the old share is not written as a
// replica yet) and that nothing forces, while switchoverNotYet says the target cannot take the
// primary without a gap: the running primary keeps taking writes meanwhile.
func (m *primaryMove) switchoverMayBegin(s *scope, now time.Time) *hold {
	if m.forced || s.shareOn(m.from).demoting(m.epoch) {
		return nil
	}
	if msg, wait := switchoverNotYet(s, m.from, m.to, m.promoted.pod, now); msg != "" {
		// The target's reports wake the database again.
		return &hold{pending: msg, wait: wait}
	}
	return nil
}

// taintsLiftedFirst holds a move that nothing forces off a cluster that is Ready again but still
// carries the NoExecute health taint the hub put on it while it was not: its Ready condition comes
// a moment before the taint goes, and the move the taint called for is then dropped. Demoting
// the primary in between stopped a healthy one: the end-to-end suite froze the primary's agent
// for a minute (the primary wrote on, on its failsafe, the failover held for silence); on the
// thaw the hub demoted it as a planned switchover, then dropped the move and promoted it again
// at a higher epoch, 25 s without a write. The health controller lifts the taint at once; a
// change of the cluster wakes the database.
func (m *primaryMove) taintsLiftedFirst(s *scope) *hold {
	if m.forced || s.shareOn(m.from).demoting(m.epoch) {
		return nil
	}
	mc := s.members[m.from]
	for _, t := range mc.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute && (t.Key == dbfleetv1alpha1.TaintClusterUnreachable || t.Key == dbfleetv1alpha1.TaintClusterNotReady) {
			return &hold{reason: dbfleetv1alpha1.ReasonClusterReturning, wait: time.Second,
				message: fmt.Sprintf("%s is Ready again but still tainted %s: the move off it waits for the taint to be lifted, when it is no longer called for", m.from, t.Key)}
		}
	}
	return nil
}

// demoteFirst holds a planned move until the old primary's agent has applied the replica role
// at the new epoch (it releases the primary Lease first): nothing is promoted while it may write.
func (m *primaryMove) demoteFirst(s *scope) *hold {
	if s.shareOn(m.from).demoted(m.epoch) {
		return nil
	}
	return &hold{reason: dbfleetv1alpha1.ReasonDemoting, demote: true,
		message: fmt.Sprintf("demoting the primary on %s (epoch %d)%s before promoting %s", m.from, m.epoch, m.why(), m.to)}
}

// handOverToken finds the promotion token, the old primary's final LSN, which the new primary
// replays past before it takes a write. A switchover's target that never promoted hands on the
// token it was given. Should the old cluster stop being Ready meanwhile, the move is a failover
// and no longer waits for it.
func (m *primaryMove) handOverToken(s *scope) *hold {
	old := s.shareOn(m.from)
	lsn, waiting := old.finalLSN(m.current.Epoch)
	if waiting != "" {
		if token, ok := old.unpromotedToken(m.current, m.epoch); ok {
			lsn, waiting = token, ""
			m.tokenSource = fmt.Sprintf("the final LSN %s (handed on: %s never ran as primary at epoch %d)", token, m.from, m.current.Epoch)
			// The switchover to it never took place: it stays asked for, and is tried again
			// once its target streams.
			m.retrySwitchover = m.stuckTarget
		}
	}
	if waiting != "" {
		return &hold{reason: dbfleetv1alpha1.ReasonDemoting, demote: true,
			message: fmt.Sprintf("the primary on %s stepped down at epoch %d%s; %s before promoting %s", m.from, m.epoch, m.why(), waiting, m.to)}
	}
	m.token = lsn
	return nil
}

// awaitEviction holds a move off a cluster that is not Ready while its share is still placed
// (its taint is still tolerated): the primary stays until the eviction, which comes at grace +
// toleration after the last renewal.
func (m *primaryMove) awaitEviction() *hold {
	return &hold{reason: dbfleetv1alpha1.ReasonWaitingForEviction,
		message: fmt.Sprintf("primary cluster %s is not ready; the primary moves when its share is evicted (after the policy's toleration)", m.from)}
}

// fencedFirst holds a failover until the old primary has certainly stopped writing (failoverGate),
// keeping the placement in force, old share and primary included.
func (r *Reconciler) fencedFirst(ctx context.Context, s *scope, m *primaryMove) *hold {
	if wait, reason, msg := r.failoverGate(ctx, s.dbc, s.members[m.from], s.shareOn(m.from), m.from); wait > 0 {
		return &hold{reason: reason, message: msg, wait: wait}
	}
	return nil
}

// synchronousFirst holds a failover of a database whose dataDurability is required until the
// target has every commit the old primary acknowledged (synchronousGate). The standbys' reports
// wake the database again; synchronousRecheck is a safety net.
func (m *primaryMove) synchronousFirst(s *scope) *hold {
	if !required(s.dbc) {
		return nil
	}
	if msg := synchronousGate(s, m.to, m.promoted.pod); msg != "" {
		return &hold{reason: dbfleetv1alpha1.ReasonWaitingForSynchronousStandby, message: msg, wait: synchronousRecheck}
	}
	return nil
}

// applyTo writes what the steps found into the placement that carries the move.
func (m *primaryMove) applyTo(planned *dbfleetv1alpha1.DatabaseCluster) {
	planned.Status.Primary.PromoteAfterLSN = m.token
	if m.retrySwitchover {
		planned.Status.Primary.Preferred = ""
	}
}

// describeToken says what the new primary replays past before it takes a write; "" when nothing.
func (m *primaryMove) describeToken() string {
	switch {
	case m.token == "":
		return ""
	case m.tokenSource != "":
		return m.tokenSource
	}
	return fmt.Sprintf("%s's final LSN %s", m.from, m.token)
}

// holdOn records a hold on the reconcile's scope: the FailoverInProgress facts, or the pending
// switchover, and the demotion it writes meanwhile.
func (m *primaryMove) holdOn(s *scope, h *hold) {
	if h.pending != "" {
		s.failover.pendingSwitchover = h.pending
	} else {
		s.failover.hold(h.reason, h.message)
	}
	if h.demote {
		s.demotion = &demotion{cluster: m.from, epoch: m.epoch}
	}
}
