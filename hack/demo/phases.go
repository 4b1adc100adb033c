package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// The demo's phases: place a database, cut its primary's member off, bring it back.

// timings are what the demo measured, for the closing summary.
type timings struct {
	federationUp              time.Duration
	scheduled, ready          time.Duration
	unknown, replaced, failed time.Duration
	promoted                  time.Duration
	back, reconverged         time.Duration
	refused, resumed          time.Duration // the old primary refused writes; the writer's rows acknowledged again
	writeGap                  time.Duration
	lost                      int64
	rejoined                  time.Duration
}

func (d *demo) place(ctx context.Context) error {
	startPhase("place", "Step 2/5: place a database")
	f := d.f
	weights := strings.Join(f.members, ", ") + " 1 each"
	para("The policy %s (a ClusterPropagationPolicy) selects databases labelled app.kubernetes.io/part-of=dbfleet-demo "+
		"and divides their replicas by static weight: %s. It tolerates the hub's dbfleet.io/unreachable taint for %d s: "+
		"a member that goes silent keeps its replicas that long, then they move.", demoPolicy, weights, tolerationSeconds)
	para("The DatabaseCluster %s/%s asks for %d PostgreSQL 15 instances (100m CPU, 128Mi memory, a 1Gi volume each), "+
		"its primary preferably in %s. Each pod runs dbfleet-instance as PID 1 with postgres as its child: the first "+
		"primary runs initdb, every other instance clones it with pg_basebackup and streams from it across clusters.",
		demoNamespace, demoDatabase, demoReplicas, f.members[0])
	policy, database, err := writeManifests(f.members)
	if err != nil {
		return err
	}
	if err := d.removeLeftovers(ctx); err != nil {
		return err
	}
	restartClock()
	if err := kubectl(ctx, "apply", "-f", policy); err != nil {
		return err
	}
	if err := kubectl(ctx, "apply", "-f", database); err != nil {
		return err
	}
	w := &watcher{f: f}
	scheduled := w.expect("the hub placed the database (Scheduled=True)", 0, func(s *snapshot) bool {
		return s.conditionIs(dbfleetv1alpha1.ConditionScheduled, metav1.ConditionTrue) && len(s.db.Status.Placements) > 0
	})
	ready := w.expect("every replica Running and Ready in its member, the database Available", 0, (*snapshot).converged)
	s, err := w.wait(ctx, scheduled, time.Minute, "is the hub running? see "+logFile(layout.Hub))
	if err != nil {
		return err
	}
	d.t.scheduled = scheduled.at
	cond := s.condition(dbfleetv1alpha1.ConditionScheduled)
	primary, epoch := s.primary()
	say("")
	para("Where the replicas went, and why. The hub's placement engine gave each cluster its weight's part of "+
		"the %d replicas, rounded to whole replicas (divisor method), and wrote each share to member-<cluster> on "+
		"the hub as a MemberDatabase, which that cluster's agent runs:", demoReplicas)
	say("  Scheduled: %s", cond.Message)
	total := len(f.members)
	for _, m := range f.members {
		weight := 1
		quota := fmt.Sprintf("weight %d/%d of %d = %.2f", weight, total, demoReplicas, float64(demoReplicas*weight)/float64(total))
		p := s.placement(m)
		if p == nil || p.Replicas == 0 {
			say("  %-8s %s → no replica", m, quota)
			continue
		}
		names := contract.PodName(demoDatabase, p.Ordinals.Start)
		if p.Ordinals.Count > 1 {
			names += " … " + contract.PodName(demoDatabase, p.Ordinals.Start+p.Ordinals.Count-1)
		}
		role := ""
		if m == primary {
			role = fmt.Sprintf("; primary (epoch %d): preferred", epoch)
		}
		say("  %-8s %s → %d replica(s), pods %s%s", m, quota, p.Replicas, names, role)
	}
	para("Each share has its own ordinal range, so pod names are unique across the fleet; the primary is where " +
		"spec.primary.preferredClusters asks. Each member's agent now runs its share as a StatefulSet on its real " +
		"node (kubelet, containerd, runc); a pod is Ready when its instance says so: the primary takes writes, a " +
		"standby streams.")
	if _, err := w.wait(ctx, ready, 3*time.Minute, "see the agents' logs "+logFile(layout.Agent("*"))+" and the members' controller managers'"); err != nil {
		return err
	}
	d.t.ready = ready.at
	out.settle()
	para("All %d replicas Ready %.0fs after kubectl apply; the hub aggregated the agents' reports into Available=True.", demoReplicas, ready.at.Seconds())
	return nil
}

// removeLeftovers deletes the demo database of an earlier run on a reused federation.
func (d *demo) removeLeftovers(ctx context.Context) error {
	if s := d.f.observe(ctx); s.db == nil {
		return nil
	}
	say("Removing %s/%s left by an earlier demo run first.", demoNamespace, demoDatabase)
	if err := kubectl(ctx, "delete", "databasecluster", "-n", demoNamespace, demoDatabase, "--wait", "--timeout=120s"); err != nil {
		return err
	}
	// The agents remove a deleted database's StatefulSet but leave its primary Lease, which stays
	// valid until it runs out; a new database of the same name would start beside it.
	s := d.f.observe(ctx)
	if valid := s.validLeases(); len(valid) > 0 {
		para("Its primary Lease is left behind in the member (%s); waiting for it to expire first.", strings.Join(valid, "; "))
	}
	deadline := time.Now().Add(d.f.fenceAfter + 15*time.Second)
	for len(s.validLeases()) > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the old primary Lease did not expire within %s: %s", d.f.fenceAfter+15*time.Second, strings.Join(s.validLeases(), "; "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
		s = d.f.observe(ctx)
	}
	return nil
}

func (d *demo) failover(ctx context.Context) error {
	f := d.f
	s := f.observe(ctx)
	victim, oldEpoch := s.primary()
	if victim == "" {
		return fmt.Errorf("the database has no primary to fail over")
	}
	d.victim = layout.Agent(victim)
	pid, _ := os.ReadFile(pidFile(d.victim))
	var oldPrimary instanceView
	for _, v := range f.instances(ctx) {
		if v.cluster == victim && v.status != nil && v.status.Role == dbfleetv1alpha1.InstanceRunningPrimary {
			oldPrimary = v
		}
	}
	if oldPrimary.pod == "" {
		return fmt.Errorf("no instance in %s reports running as primary", victim)
	}
	startPhase("failover", fmt.Sprintf("Step 4/5: cut %s off", victim))
	para("%s holds the primary. Its agent (pid %s, from %s) is the member's only link to the hub. We stop it, "+
		"as a crash or a network partition would: the pods in %s keep running, but the hub stops hearing from the "+
		"cluster. What should follow:", victim, strings.TrimSpace(string(pid)), pidFile(d.victim), victim)
	bullet("its primary Lease %s (renewed only while the agent reaches the hub) runs out after at most %s, and "+
		"the instance manager in %s stops postgres (fast shutdown) 2 s before that, on its own clock: from then on "+
		"it refuses every write (the demo tries one directly at %s every second, besides the writer's);", primaryLease, f.fenceAfter, oldPrimary.pod, oldPrimary.endpoint())
	bullet("after %s without a lease renewal (the hub's grace period, on its own clock) the hub marks %s "+
		"Ready=Unknown and taints it dbfleet.io/unreachable:NoExecute;", f.grace, victim)
	bullet("after the policy's %d s toleration its replicas are placed on the other clusters, and the primary "+
		"moves to a healthy cluster with a higher epoch (never before the old Lease has expired);", tolerationSeconds)
	bullet("the replacements become Ready, and the writer's rows are acknowledged again at the new primary.")
	restartClock()
	if err := localfed(ctx, "stop", d.victim); err != nil {
		return fmt.Errorf("stop %s: %w", d.victim, err)
	}
	before := s
	w := &watcher{f: f, prev: s}
	unknown := w.expect(fmt.Sprintf("the hub marked %s Ready=Unknown", victim), 0, func(s *snapshot) bool {
		return s.member(victim).ready == string(metav1.ConditionUnknown)
	})
	tainted := w.expect(fmt.Sprintf("%s tainted dbfleet.io/unreachable:NoExecute", victim), 0, func(s *snapshot) bool {
		return strings.Contains(strings.Join(s.member(victim).taints, " "), dbfleetv1alpha1.TaintClusterUnreachable+":NoExecute")
	})
	lastExpiry := before.member(victim).leaseExpiry // the Lease runs out at its own expiry, not when a poll sees it
	leaseGone := w.expect(fmt.Sprintf("%s's primary Lease expired", victim), 0, func(s *snapshot) bool {
		if m := s.member(victim); m.leaseValid {
			lastExpiry = m.leaseExpiry
			return false
		}
		return true
	})
	promoted := w.expect(fmt.Sprintf("a new primary outside %s, epoch above %d", victim, oldEpoch), 0, func(s *snapshot) bool {
		c, e := s.primary()
		return c != "" && c != victim && e > oldEpoch
	})
	replaced := w.expect(fmt.Sprintf("%s's replicas placed on the other clusters", victim), 0, func(s *snapshot) bool {
		p := s.placement(victim)
		return s.db != nil && (p == nil || p.Replicas == 0)
	})
	recovered := w.expect(fmt.Sprintf("all %d replicas Ready again outside %s, the database Available", demoReplicas, victim), 0, func(s *snapshot) bool {
		return recoveredWithout(s, victim)
	})
	// The direct probe of the old primary: when it first refused, and whether it accepted a
	// write once another instance had been promoted (it must not).
	var probes int64
	var acceptedAfterPromotion []string
	refused := w.expect(fmt.Sprintf("the old primary %s refuses writes (fenced in the engine)", oldPrimary.pod), 0, func(s *snapshot) bool {
		probes++
		err := d.writer.creds.probeWrite(ctx, oldPrimary.endpoint(), probes)
		if c, e := s.primary(); err == nil && c != victim && e > oldEpoch {
			acceptedAfterPromotion = append(acceptedAfterPromotion, s.at.Format(time.TimeOnly))
		}
		return err != nil
	})
	oldEndpoint := oldPrimary.endpoint()
	resumed := w.expect("the writer's rows acknowledged again, at the new primary", 0, func(*snapshot) bool {
		st := d.writer.stats()
		return st.lastEndpoint != "" && st.lastEndpoint != oldEndpoint
	})
	budget := f.grace + 2*f.heartbeat + 30*time.Second
	if _, err := w.wait(ctx, unknown, budget, fmt.Sprintf("the hub should judge %s after %s without a lease renewal; see %s", victim, f.grace, logFile(layout.Hub))); err != nil {
		return err
	}
	d.t.unknown = unknown.at
	if _, err := w.wait(ctx, tainted, budget+15*time.Second, "see "+logFile(layout.Hub)); err != nil {
		return err
	}
	budget += time.Duration(tolerationSeconds)*time.Second + 30*time.Second
	if _, err := w.wait(ctx, replaced, budget, fmt.Sprintf("the toleration of %d s should have run out; see %s", tolerationSeconds, logFile(layout.Hub))); err != nil {
		return err
	}
	d.t.replaced = replaced.at
	if _, err := w.wait(ctx, promoted, budget+f.fenceAfter, "see "+logFile(layout.Hub)); err != nil {
		return err
	}
	if _, err := w.wait(ctx, recovered, budget+3*time.Minute, "see the agents' logs "+logFile(layout.Agent("*"))); err != nil {
		return err
	}
	d.t.failed = recovered.at
	if _, err := w.wait(ctx, refused, budget, "its instance manager should have fenced it; see kubectl logs in "+victim); err != nil {
		return err
	}
	d.t.refused = refused.at
	if _, err := w.wait(ctx, resumed, budget+time.Minute, "the writer's last error: "+d.writer.stats().lastErr); err != nil {
		return err
	}
	d.t.resumed = resumed.at
	if _, err := w.wait(ctx, leaseGone, budget+3*time.Minute, "the agent is stopped, so nothing renews it"); err != nil {
		return err
	}
	if !lastExpiry.IsZero() {
		leaseGone.at = lastExpiry.Sub(out.phaseStart).Round(100 * time.Millisecond)
	}
	d.t.promoted = promoted.at
	out.settle()
	s = w.prev
	c, e := s.primary()
	para("Failover done: %d/%d replicas Ready on %s; the primary is in %s at epoch %d.", s.db.Status.ReadyReplicas, s.db.Spec.Replicas, s.shares(), c, e)
	if m := s.member(victim); m != nil && m.pods > 0 {
		para("%s still runs its %d old pods: its agent is gone, so nothing there removes or relabels them; the hub "+
			"no longer counts them.", victim, m.pods)
	}
	switch {
	case before.member(victim).leaseHolder == "":
		para("%s held no primary Lease %s before the cut (this agent build keeps none).", victim, primaryLease)
	case leaseGone.at <= promoted.at:
		para("%s's primary Lease expired at +%.1fs, before %s was promoted at +%.1fs: a database that honours the "+
			"Lease stopped writing in %s first, so there were never two primaries.", victim, leaseGone.at.Seconds(), c, promoted.at.Seconds(), victim)
	default:
		para("WARNING: %s's primary Lease expired at +%.1fs, after %s was promoted at +%.1fs.", victim, leaseGone.at.Seconds(), c, promoted.at.Seconds())
	}
	if err := d.judgeWrites(ctx, oldEndpoint, acceptedAfterPromotion); err != nil {
		return err
	}
	w.timeline(fmt.Sprintf("Timeline, from the moment %s's agent stopped:", victim))
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

func (d *demo) recover(ctx context.Context) error {
	f := d.f
	victim := strings.TrimPrefix(d.victim, layout.Agent(""))
	startPhase("return", fmt.Sprintf("Step 5/5: bring %s back", victim))
	para("We start %s's agent again with the command localfed up used (bin/localfed start %s). It renews its "+
		"lease, the hub marks the cluster Ready and lifts the taint, and the agent removes the share the hub "+
		"purged while it was away. Nothing moves back on its own: %s is eligible for new placements, and "+
		"'kubectl annotate dbc <name> dbfleet.io/rebalance=<new value>' asks the hub to spread replicas again.", victim, d.victim, victim)
	w := &watcher{f: f, prev: f.observe(ctx)}
	restartClock()
	if err := localfed(ctx, "start", d.victim); err != nil {
		return fmt.Errorf("start %s: %w", d.victim, err)
	}
	d.victim = ""
	ready := w.expect(fmt.Sprintf("the hub marked %s Ready=True", victim), 0, func(s *snapshot) bool {
		return s.member(victim).ready == string(metav1.ConditionTrue)
	})
	untainted := w.expect(fmt.Sprintf("%s's taints removed", victim), 0, func(s *snapshot) bool {
		return len(s.member(victim).taints) == 0
	})
	settled := w.expect("every member runs exactly its share, all Ready (steady for 5 s)", 5*time.Second, (*snapshot).converged)
	if _, err := w.wait(ctx, ready, f.heartbeat+30*time.Second, "see "+logFile(d.victim)); err != nil {
		return err
	}
	d.t.back = ready.at
	if _, err := w.wait(ctx, untainted, f.heartbeat+45*time.Second, "see "+logFile(layout.Hub)); err != nil {
		return err
	}
	if _, err := w.wait(ctx, settled, 3*time.Minute, "see "+logFile(layout.Agent(victim))+" and "+logFile(layout.Hub)); err != nil {
		return err
	}
	d.t.reconverged = settled.at
	out.settle()
	s := w.prev
	c, e := s.primary()
	para("%s is back: %d/%d replicas Ready on %s; the primary stays in %s at epoch %d.", victim, s.db.Status.ReadyReplicas, s.db.Spec.Replicas, s.shares(), c, e)
	w.timeline(fmt.Sprintf("Timeline, from the moment %s's agent started again:", victim))

	para("Now we ask the hub to spread the replicas again (kubectl annotate dbc %s %s=...): %s gets its replica "+
		"back, a standby that clones the new primary with pg_basebackup and streams from it, while the writer goes on.",
		demoDatabase, dbfleetv1alpha1.AnnotationRebalance, victim)
	restartClock()
	if err := kubectl(ctx, "annotate", "dbc", "-n", demoNamespace, demoDatabase, "--overwrite",
		fmt.Sprintf("%s=%d", dbfleetv1alpha1.AnnotationRebalance, time.Now().Unix())); err != nil {
		return err
	}
	rejoined := w.expect(fmt.Sprintf("a standby in %s streams again, every replica Ready (steady for 5 s)", victim), 5*time.Second, func(s *snapshot) bool {
		p := s.placement(victim)
		return p != nil && p.Replicas > 0 && s.converged()
	})
	if _, err := w.wait(ctx, rejoined, 3*time.Minute, "see "+logFile(layout.Agent(victim))+" and "+logFile(layout.Hub)); err != nil {
		return err
	}
	d.t.rejoined = rejoined.at
	out.settle()
	w.timeline(fmt.Sprintf("Timeline, from the rebalance annotation:"))
	d.writer.close()
	if err := sleep(ctx, 2*pollInterval); err != nil {
		return err
	}
	d.showInstances(ctx, "The writer stopped; every instance read directly again")
	st := d.writer.stats()
	for _, v := range f.instances(ctx) {
		if n, err := d.writer.creds.missingAt(ctx, v.endpoint(), d.writer.acked()); err == nil && n > 0 {
			para("%s (%s) lacks %d of the %d acknowledged rows.", v.pod, v.cluster, n, st.acked)
		}
	}
	return nil
}
