package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// failover partitions the primary's member (localfed partition: its pods cut from the other
// members' pods and its agent from the hub), and narrates what follows until the database is
// Available again without it.
func (d *demo) failover(ctx context.Context) error {
	f := d.f
	s := f.observe(ctx)
	victim, oldEpoch := s.primary()
	if victim == "" {
		return fmt.Errorf("the database has no primary to fail over")
	}
	oldPrimary, err := f.runningPrimary(ctx, victim)
	if err != nil {
		return err
	}
	d.announceCut(victim, oldPrimary)
	restartClock()
	if err := localfed(ctx, "partition", victim); err != nil {
		return fmt.Errorf("partition %s: %w", victim, err)
	}
	d.partitioned = victim
	before := s
	w := &watcher{f: f, prev: s}
	m := d.expectFailover(ctx, w, before, victim, oldEpoch, oldPrimary)
	if err := d.awaitFailover(ctx, w, m, victim); err != nil {
		return err
	}
	out.settle()
	return d.reportFailover(ctx, w, m, before, victim)
}

// runningPrimary is the instance in cluster that reports running as primary.
func (f *federation) runningPrimary(ctx context.Context, cluster string) (instanceView, error) {
	var primary instanceView
	for _, v := range f.instances(ctx) {
		if v.cluster == cluster && v.status != nil && v.status.Role == dbfleetv1alpha1.InstanceRunningPrimary {
			primary = v
		}
	}
	if primary.pod == "" {
		return instanceView{}, fmt.Errorf("no instance in %s reports running as primary", cluster)
	}
	return primary, nil
}

// announceCut says what is about to be cut off and what should follow.
func (d *demo) announceCut(victim string, oldPrimary instanceView) {
	f := d.f
	startPhase("failover", fmt.Sprintf("Step 5/6: partition %s", victim))
	para("Now a real fault. We partition %s (bin/localfed partition %s): iptables rules cut its pods off from every "+
		"other member's pods, both ways, and its agent off from the hub. Everything in %s keeps running, its agent "+
		"included, but the primary no longer hears its standbys and the hub no longer hears %s. What should follow:",
		victim, victim, victim, victim)
	bullet("its primary Lease %s is no longer renewed and runs out after at most %s; with no standby heard for "+
		"%s either, the instance manager in %s stops postgres (fast shutdown) on its own clock, and its agent "+
		"labels the pod fenced: from then on it refuses every write (the demo tries one directly at %s every "+
		"second, besides the writer's);", primaryLease, f.fenceAfter, contract.FailsafeWindow, oldPrimary.pod, oldPrimary.endpoint())
	bullet("after %s without a lease renewal (the hub's grace period, on its own clock) the hub marks %s "+
		"Ready=Unknown and taints it dbfleet.io/unreachable:NoExecute;", f.grace, victim)
	bullet("after the policy's %d s toleration its replicas are placed on the other clusters, and the primary "+
		"moves to a healthy cluster with a higher epoch (never before the old Lease has expired, and only to a standby "+
		"that has heard nothing from the old primary for %s);", tolerationSeconds, contract.PromotionSilence)
	bullet("the replacements become Ready, and the writer's rows are acknowledged again at the new primary.")
}

// failoverMilestones are what the demo expects once victim is partitioned, and what it learns on
// the way.
type failoverMilestones struct {
	unknown, tainted, leaseGone, promoted, replaced, recovered, refused, resumed *milestone
	// lastExpiry is when victim's primary Lease ran out, as its last renewal said.
	lastExpiry time.Time
	// probes counts the direct writes tried at the old primary; acceptedAfterPromotion are the
	// times one was accepted although another instance had been promoted.
	probes                 int64
	acceptedAfterPromotion []string
	oldEndpoint            string
}

// expectFailover registers on w the milestones of victim's failover.
func (d *demo) expectFailover(ctx context.Context, w *watcher, before *snapshot, victim string, oldEpoch int64, oldPrimary instanceView) *failoverMilestones {
	m := &failoverMilestones{}
	m.unknown = w.expect(fmt.Sprintf("the hub marked %s Ready=Unknown", victim), 0, func(s *snapshot) bool {
		return s.member(victim).ready == string(metav1.ConditionUnknown)
	})
	m.tainted = w.expect(fmt.Sprintf("%s tainted dbfleet.io/unreachable:NoExecute", victim), 0, func(s *snapshot) bool {
		return strings.Contains(strings.Join(s.member(victim).taints, " "), dbfleetv1alpha1.TaintClusterUnreachable+":NoExecute")
	})
	m.lastExpiry = before.member(victim).leaseExpiry // the Lease runs out at its own expiry, not when a poll sees it
	m.leaseGone = w.expect(fmt.Sprintf("%s's primary Lease expired", victim), 0, func(s *snapshot) bool {
		if v := s.member(victim); v.leaseValid {
			m.lastExpiry = v.leaseExpiry
			return false
		}
		return true
	})
	m.promoted = w.expect(fmt.Sprintf("a new primary outside %s, epoch above %d", victim, oldEpoch), 0, func(s *snapshot) bool {
		c, e := s.primary()
		return c != "" && c != victim && e > oldEpoch
	})
	m.replaced = w.expect(fmt.Sprintf("%s's replicas placed on the other clusters", victim), 0, func(s *snapshot) bool {
		p := s.placement(victim)
		return s.db != nil && (p == nil || p.Replicas == 0)
	})
	m.recovered = w.expect(fmt.Sprintf("all %d replicas Ready again outside %s, the database Available", demoReplicas, victim), 0, func(s *snapshot) bool {
		return recoveredWithout(s, victim)
	})
	// The direct probe of the old primary: when it first refused, and whether it accepted a
	// write once another instance had been promoted (it must not).
	m.refused = w.expect(fmt.Sprintf("the old primary %s refuses writes (fenced in the engine)", oldPrimary.pod), 0, func(s *snapshot) bool {
		m.probes++
		err := d.writer.creds.probeWrite(ctx, oldPrimary.endpoint(), m.probes)
		if c, e := s.primary(); err == nil && c != victim && e > oldEpoch {
			m.acceptedAfterPromotion = append(m.acceptedAfterPromotion, s.at.Format(time.TimeOnly))
		}
		return err != nil
	})
	m.oldEndpoint = oldPrimary.endpoint()
	m.resumed = w.expect("the writer's rows acknowledged again, at the new primary", 0, func(*snapshot) bool {
		st := d.writer.stats()
		return st.lastEndpoint != "" && st.lastEndpoint != m.oldEndpoint
	})
	return m
}

// awaitFailover waits for each milestone within its budget, counted from the cut, and keeps the
// times the summary reports.
func (d *demo) awaitFailover(ctx context.Context, w *watcher, m *failoverMilestones, victim string) error {
	f := d.f
	budget := f.grace + 2*f.heartbeat + 30*time.Second
	if _, err := w.wait(ctx, m.unknown, budget, fmt.Sprintf("the hub should judge %s after %s without a lease renewal; see %s", victim, f.grace, logFile(layout.Hub))); err != nil {
		return err
	}
	d.t.unknown = m.unknown.at
	if _, err := w.wait(ctx, m.tainted, budget+15*time.Second, "see "+logFile(layout.Hub)); err != nil {
		return err
	}
	budget += time.Duration(tolerationSeconds)*time.Second + 30*time.Second
	if _, err := w.wait(ctx, m.replaced, budget, fmt.Sprintf("the toleration of %d s should have run out; see %s", tolerationSeconds, logFile(layout.Hub))); err != nil {
		return err
	}
	d.t.replaced = m.replaced.at
	if _, err := w.wait(ctx, m.promoted, budget+f.fenceAfter, "see "+logFile(layout.Hub)); err != nil {
		return err
	}
	if _, err := w.wait(ctx, m.recovered, budget+3*time.Minute, "see the agents' logs "+logFile(layout.Agent("*"))); err != nil {
		return err
	}
	d.t.failed = m.recovered.at
	if _, err := w.wait(ctx, m.refused, budget, "its instance manager should have fenced it; see kubectl logs in "+victim); err != nil {
		return err
	}
	d.t.refused = m.refused.at
	if _, err := w.wait(ctx, m.resumed, budget+time.Minute, "the writer's last error: "+d.writer.stats().lastErr); err != nil {
		return err
	}
	d.t.resumed = m.resumed.at
	if _, err := w.wait(ctx, m.leaseGone, budget+3*time.Minute, "the agent is cut off the hub, so it renews nothing"); err != nil {
		return err
	}
	if !m.lastExpiry.IsZero() {
		m.leaseGone.at = m.lastExpiry.Sub(out.phaseStart).Round(100 * time.Millisecond)
	}
	d.t.promoted = m.promoted.at
	return nil
}

// reportFailover says where the database is now, whether the old primary's Lease expired before
// the promotion, and what the client saw, then prints the timeline.
func (d *demo) reportFailover(ctx context.Context, w *watcher, m *failoverMilestones, before *snapshot, victim string) error {
	s := w.prev
	c, e := s.primary()
	para("Failover done: %d/%d replicas Ready on %s; the primary is in %s at epoch %d.", s.db.Status.ReadyReplicas, s.db.Spec.Replicas, s.shares(), c, e)
	if v := s.member(victim); v != nil && v.pods > 0 {
		para("%s still runs its %d old pods (labelled fenced: %v): its agent, cut off the hub, removes them once "+
			"the partition heals; the hub no longer counts them.", victim, v.pods, v.fencedPods)
	}
	switch {
	case before.member(victim).leaseHolder == "":
		para("%s held no primary Lease %s before the cut (this agent build keeps none).", victim, primaryLease)
	case m.leaseGone.at <= m.promoted.at:
		para("%s's primary Lease expired at +%.1fs, before %s was promoted at +%.1fs: a database that honours the "+
			"Lease stopped writing in %s first, so there were never two primaries.", victim, m.leaseGone.at.Seconds(), c, m.promoted.at.Seconds(), victim)
	default:
		para("WARNING: %s's primary Lease expired at +%.1fs, after %s was promoted at +%.1fs.", victim, m.leaseGone.at.Seconds(), c, m.promoted.at.Seconds())
	}
	if err := d.judgeWrites(ctx, m.oldEndpoint, m.acceptedAfterPromotion); err != nil {
		return err
	}
	w.timeline(fmt.Sprintf("Timeline, from the moment %s was partitioned:", victim))
	return nil
}

// judgeWrites says what the client saw: the write gap, where writes went, and whether every
// acknowledged row is on the new primary.
func (d *demo) judgeWrites(ctx context.Context, oldEndpoint string, acceptedAfterPromotion []string) error {
	st := d.writer.stats()
	newEndpoint := st.lastEndpoint
	lastOld, firstNew := st.lastAtEndpoint[oldEndpoint], st.firstAt[newEndpoint]
	gap := firstNew.Sub(lastOld).Round(100 * time.Millisecond)
	d.t.writeGap = gap
	missing, err := d.writer.creds.missingAt(ctx, newEndpoint, d.writer.acked())
	if err != nil {
		return fmt.Errorf("count the acknowledged rows on the new primary %s: %w", newEndpoint, err)
	}
	d.t.lost = missing
	para("What the client saw: its last row acknowledged by the old primary (%s) at +%.1fs, its first by the new "+
		"one (%s) at +%.1fs: no write was accepted for %s. Between them %d attempts failed (last: %s).",
		oldEndpoint, lastOld.Sub(out.phaseStart).Seconds(), newEndpoint, firstNew.Sub(out.phaseStart).Seconds(), gap, st.failed, st.lastErr)
	if lastOld.After(firstNew) {
		para("WARNING: the old primary acknowledged a row after the new one did: two instances accepted writes at once.")
	}
	if len(acceptedAfterPromotion) > 0 {
		para("WARNING: the old primary accepted a direct write after the promotion, at %s.", strings.Join(acceptedAfterPromotion, ", "))
	}
	if missing == 0 {
		para("All %d acknowledged rows are on the new primary: nothing was lost. (Replication is asynchronous here: "+
			"the old primary stopped taking writes before its Lease ran out, and the standby it streamed to had "+
			"received everything by then.)", st.acked)
	} else {
		para("%d of %d acknowledged rows are NOT on the new primary: replication is asynchronous, and they had not "+
			"reached the promoted standby when the old primary stopped.", missing, st.acked)
	}
	return nil
}

// recoveredWithout: every replica placed outside victim is Ready there, and the hub says Available.
func recoveredWithout(s *snapshot, victim string) bool {
	if s.db == nil || s.db.Status.ReadyReplicas != s.db.Spec.Replicas ||
		!s.conditionIs(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue) {
		return false
	}
	for _, m := range s.members {
		if m.name == victim {
			continue
		}
		want := int32(0)
		if p := s.placement(m.name); p != nil {
			want = p.Replicas
		}
		if int32(m.pods) != want || int32(m.podsReady) != want {
			return false
		}
	}
	p := s.placement(victim)
	return p == nil || p.Replicas == 0
}
