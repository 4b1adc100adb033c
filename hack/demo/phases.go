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

// The demo's phases: place a database, cut its primary's member off, bring it back.

// timings are what the demo measured, for the closing summary.
type timings struct {
	federationUp              time.Duration
	scheduled, ready          time.Duration
	unknown, replaced, failed time.Duration
	promoted                  time.Duration
	back, reconverged         time.Duration
	refused, resumed          time.Duration // the old primary refused writes; the writer's rows acknowledged again
	agentGap                  time.Duration // the longest stretch without an acknowledged row while the agent was stopped
	writeGap                  time.Duration
	lost                      int64
	rejoined                  time.Duration
}

func (d *demo) place(ctx context.Context) error {
	startPhase("place", "Step 2/6: place a database")
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

func (d *demo) recover(ctx context.Context) error {
	f := d.f
	victim := d.partitioned
	startPhase("return", fmt.Sprintf("Step 6/6: heal %s", victim))
	para("We remove the partition (bin/localfed heal %s). The agent reaches the hub again, the hub marks the "+
		"cluster Ready and lifts the taint, and the agent removes the share the hub purged while it was away. "+
		"Nothing moves back on its own: %s is eligible for new placements, and "+
		"'kubectl annotate dbc <name> dbfleet.io/rebalance=<new value>' asks the hub to spread replicas again.", victim, victim)
	w := &watcher{f: f, prev: f.observe(ctx)}
	restartClock()
	if err := localfed(ctx, "heal", victim); err != nil {
		return fmt.Errorf("heal %s: %w", victim, err)
	}
	d.partitioned = ""
	ready := w.expect(fmt.Sprintf("the hub marked %s Ready=True", victim), 0, func(s *snapshot) bool {
		return s.member(victim).ready == string(metav1.ConditionTrue)
	})
	untainted := w.expect(fmt.Sprintf("%s's taints removed", victim), 0, func(s *snapshot) bool {
		return len(s.member(victim).taints) == 0
	})
	settled := w.expect("every member runs exactly its share, all Ready (steady for 5 s)", 5*time.Second, (*snapshot).converged)
	if _, err := w.wait(ctx, ready, f.heartbeat+30*time.Second, "see "+logFile(layout.Agent(victim))); err != nil {
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
	w.timeline(fmt.Sprintf("Timeline, from the moment %s's partition healed:", victim))

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
