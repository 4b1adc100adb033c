package main

import (
	"fmt"
	"slices"
	"strings"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// changes narrates what changed between two snapshots, in plain words.
func changes(prev, cur *snapshot) []string {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	for _, m := range cur.members {
		p := prev.member(m.name)
		if p == nil {
			continue
		}
		if m.ready != p.ready {
			add("MemberCluster %s: Ready %s → %s (%s: %s)", m.name, p.ready, m.ready, m.readyReason, m.readyMsg)
		}
		for _, t := range m.taints {
			if !slices.Contains(p.taints, t) {
				add("MemberCluster %s: tainted %s", m.name, t)
			}
		}
		for _, t := range p.taints {
			if !slices.Contains(m.taints, t) {
				add("MemberCluster %s: taint %s removed", m.name, t)
			}
		}
		if m.err != "" && p.err == "" {
			add("%s: its API server does not answer: %s", m.name, m.err)
		}
		if m.pods != p.pods || m.podsReady != p.podsReady {
			add("%s: %d/%d pods Ready (was %d/%d)", m.name, m.podsReady, m.pods, p.podsReady, p.pods)
		}
		switch {
		case m.leaseHolder != p.leaseHolder && m.leaseHolder == "":
			add("%s: primary Lease %s deleted", m.name, p.leaseHolder)
		case m.leaseHolder != p.leaseHolder:
			add("%s: primary Lease %s held by %s", m.name, primaryLease, m.leaseHolder)
		case p.leaseValid && !m.leaseValid:
			add("%s: primary Lease %s expired: a primary there stops writing unless it hears every standby (its failsafe)", m.name, m.leaseHolder)
		}
		if !slices.Equal(m.fencedPods, p.fencedPods) && len(m.fencedPods) > 0 {
			add("%s: pod %s fenced (dbfleet.io/role=fenced)", m.name, strings.Join(m.fencedPods, ","))
		}
		if !slices.Equal(m.primaryPods, p.primaryPods) {
			switch {
			case len(m.primaryPods) == 0:
				add("%s: no pod labelled primary any more (was %s)", m.name, strings.Join(p.primaryPods, ","))
			default:
				add("%s: pod %s labelled dbfleet.io/role=primary", m.name, strings.Join(m.primaryPods, ","))
			}
		}
	}
	if valid := cur.validLeases(); len(valid) > 1 && len(prev.validLeases()) <= 1 {
		add("WARNING: %d unexpired primary Leases at once: %s", len(valid), strings.Join(valid, "; "))
	}
	if cur.db == nil || prev.db == nil {
		if (cur.db == nil) != (prev.db == nil) && cur.db == nil {
			add("DatabaseCluster %s/%s is gone", demoNamespace, demoDatabase)
		}
		return lines
	}
	if moves := placementMoves(prev, cur); moves != "" {
		add("placement: %s", moves)
	}
	for _, m := range cur.members {
		pp, cp := prev.placement(m.name), cur.placement(m.name)
		if pp != nil && cp != nil && pp.State != cp.State {
			add("share in %s: %s → %s", m.name, pp.State, cp.State)
		}
	}
	pc, pe := prev.primary()
	cc, ce := cur.primary()
	if pc != cc || pe != ce {
		from := pc
		if from == "" {
			from = "none"
		}
		add("primary: %s (epoch %d) → %s (epoch %d)", from, pe, cc, ce)
	}
	if prev.db.Status.ReadyReplicas != cur.db.Status.ReadyReplicas {
		add("DatabaseCluster ready replicas %d → %d", prev.db.Status.ReadyReplicas, cur.db.Status.ReadyReplicas)
	}
	for _, t := range []string{dbfleetv1alpha1.ConditionScheduled, dbfleetv1alpha1.ConditionPropagated, dbfleetv1alpha1.ConditionAvailable,
		dbfleetv1alpha1.ConditionProgressing, dbfleetv1alpha1.ConditionDegraded, dbfleetv1alpha1.ConditionFailoverInProgress} {
		pc, cc := prev.condition(t), cur.condition(t)
		if cc == nil {
			continue
		}
		if pc == nil || pc.Status != cc.Status || pc.Reason != cc.Reason {
			add("%s", conditionText(cc))
		}
	}
	return lines
}

// placementMoves is "east 3→0, west 1→2, central 1→3", or "" when no share changed.
func placementMoves(prev, cur *snapshot) string {
	var moves []string
	for _, m := range cur.members {
		var before, after int32
		if p := prev.placement(m.name); p != nil {
			before = p.Replicas
		}
		if p := cur.placement(m.name); p != nil {
			after = p.Replicas
		}
		if before != after {
			moves = append(moves, fmt.Sprintf("%s %d→%d", m.name, before, after))
		}
	}
	return strings.Join(moves, ", ")
}
