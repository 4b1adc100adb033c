package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// agentAway stops the primary's agent for longer than every timer on the way to a failover, and
// shows that the client's writes go on: the primary hears its standbys (its failsafe), no standby
// is silent, so the hub promotes none. Then it starts the agent again.
func (d *demo) agentAway(ctx context.Context) error {
	f := d.f
	s := f.observe(ctx)
	home, epoch := s.primary()
	if home == "" {
		return fmt.Errorf("the database has no primary")
	}
	agent := layout.Agent(home)
	hold := f.grace + time.Duration(tolerationSeconds)*time.Second + contract.PromotionSilence + 15*time.Second
	startPhase("agent", fmt.Sprintf("Step 4/6: stop %s's agent", home))
	para("%s holds the primary. We stop its agent (bin/localfed stop %s), as a crash, a restart or a helm upgrade "+
		"would, and keep it stopped for %s: longer than the hub's grace period (%s), the policy's toleration (%d s) "+
		"and the silence a promotion waits for (%s) together. What should follow:", home, agent, hold, f.grace,
		tolerationSeconds, contract.PromotionSilence)
	bullet("the primary Lease %s is no longer renewed and runs out after at most %s; the primary goes on taking "+
		"writes all the same, because it hears every standby (its failsafe, docs/failover.md);", primaryLease, f.fenceAfter)
	bullet("the hub marks %s Ready=Unknown and, once the toleration runs out, wants the primary elsewhere, but "+
		"holds the failover: no standby has been silent, so the old primary may still be taking writes;", home)
	bullet("the writer never stops: its rows are acknowledged by the same primary throughout.")
	restartClock()
	if err := localfed(ctx, "stop", agent); err != nil {
		return fmt.Errorf("stop %s: %w", agent, err)
	}
	d.stoppedAgent = agent
	w := &watcher{f: f, prev: s}
	unknown := w.expect(fmt.Sprintf("the hub marked %s Ready=Unknown", home), 0, func(s *snapshot) bool {
		return s.member(home).ready == string(metav1.ConditionUnknown)
	})
	leaseGone := w.expect(fmt.Sprintf("%s's primary Lease expired; the primary takes writes on", home), 0, func(s *snapshot) bool {
		return !s.member(home).leaseValid
	})
	w.expect("the hub holds the failover: no standby is silent (FailoverInProgress, WaitingForSilence)", 0, func(s *snapshot) bool {
		c := s.condition(dbfleetv1alpha1.ConditionFailoverInProgress)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == dbfleetv1alpha1.ReasonWaitingForSilence
	})
	moved := w.expect("a new primary", 0, func(s *snapshot) bool {
		c, e := s.primary()
		return c != home || e != epoch
	})
	elapsed := w.expect(fmt.Sprintf("%s with %s's agent stopped", hold, home), 0, func(*snapshot) bool { return since() >= hold })
	if _, err := w.wait(ctx, elapsed, hold+time.Minute, ""); err != nil {
		return err
	}
	if moved.done {
		return fmt.Errorf("the hub promoted another primary while only %s's agent was stopped", home)
	}
	gap, at := d.writer.longestGap(out.phaseStart)
	out.settle()
	para("For %s the writer's rows were acknowledged by the primary in %s; the longest stretch without an "+
		"acknowledged row was %s (at +%.1fs). No promotion: the primary is still in %s at epoch %d.",
		hold, home, gap.Round(10*time.Millisecond), at.Sub(out.phaseStart).Seconds(), home, epoch)
	if !leaseGone.done || !unknown.done {
		para("(The hub did not get as far as it could: Lease expired %t, Ready=Unknown %t.)", leaseGone.done, unknown.done)
	}
	w.timeline(fmt.Sprintf("Timeline, from the moment %s's agent stopped:", home))
	d.t.agentGap = gap

	para("We start the agent again (bin/localfed start %s): it renews the Lease and the hub sees %s Ready.", agent, home)
	restartClock()
	if err := localfed(ctx, "start", agent); err != nil {
		return fmt.Errorf("start %s: %w", agent, err)
	}
	d.stoppedAgent = ""
	back := w.expect("every member runs exactly its share, all Ready (steady for 5 s)", 5*time.Second, (*snapshot).converged)
	if _, err := w.wait(ctx, back, 3*time.Minute, "see "+logFile(agent)+" and "+logFile(layout.Hub)); err != nil {
		return err
	}
	out.settle()
	w.timeline(fmt.Sprintf("Timeline, from the moment %s's agent started again:", home))
	return nil
}
