package databasecluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/pkg/policy"
)

// Reasons of the Scheduled condition.
const (
	ReasonScheduled        = "Scheduled"
	ReasonNoPolicy         = "NoPolicy"
	ReasonUnschedulable    = "Unschedulable"
	ReasonInvalidPlacement = "InvalidPlacement"
)

// schedule binds the winning policy and runs the placement engine, recording the result in
// status.policy, status.placements, status.primary and the Scheduled condition. When nothing can
// be scheduled the previous placement stays: losing a policy or every cluster never deletes data.
// It returns how soon a time-based change (a NoExecute toleration running out) needs another look.
func (r *Reconciler) schedule(ctx context.Context, s *scope) (time.Duration, error) {
	dbc := s.dbc
	match, err := r.matchPolicy(ctx, dbc)
	if err != nil {
		return 0, err
	}
	if match == nil {
		dbc.Status.Policy = nil
		r.setScheduled(dbc, metav1.ConditionFalse, ReasonNoPolicy,
			"no PropagationPolicy or ClusterPropagationPolicy selects this DatabaseCluster; current placement (if any) is kept")
		decisions.WithLabelValues(ReasonNoPolicy).Inc()
		return 0, nil
	}
	dbc.Status.Policy = &match.Ref

	now := r.Clock.Now()
	in := placement.Input{
		Replicas:  dbc.Spec.Replicas,
		Placement: match.Spec.Placement,
		Clusters:  clusterSnapshot(s.members, dbc.Spec.Resources.Requests),
		Previous:  previousDecision(dbc),
		Now:       now,
	}
	if dbc.Spec.Primary != nil {
		in.PreferredPrimaries = dbc.Spec.Primary.PreferredClusters
	}
	start := time.Now()
	decision, err := placement.Schedule(in)
	schedulingSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		reason := ReasonUnschedulable
		var unschedulable *placement.UnschedulableError
		if !errors.As(err, &unschedulable) {
			reason = ReasonInvalidPlacement
		}
		decisions.WithLabelValues(reason).Inc()
		if r.setScheduled(dbc, metav1.ConditionFalse, reason, err.Error()+"; current placement (if any) is kept") {
			r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, reason, "Schedule", "%v", err)
		}
		return requeueForTaints(s.members, match.Spec.Placement.ClusterTolerations, now), nil
	}
	decisions.WithLabelValues(ReasonScheduled).Inc()
	r.applyDecision(dbc, decision, now)
	return requeueForTaints(s.members, match.Spec.Placement.ClusterTolerations, now), nil
}

func (r *Reconciler) matchPolicy(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster) (*policy.Match, error) {
	pps := &dbfleetv1alpha1.PropagationPolicyList{}
	if err := r.Client.List(ctx, pps, clientInNamespace(dbc.Namespace)); err != nil {
		return nil, fmt.Errorf("list PropagationPolicies: %w", err)
	}
	cpps := &dbfleetv1alpha1.ClusterPropagationPolicyList{}
	if err := r.Client.List(ctx, cpps); err != nil {
		return nil, fmt.Errorf("list ClusterPropagationPolicies: %w", err)
	}
	return policy.Select(dbc, pps.Items, cpps.Items), nil
}

// applyDecision writes a successful decision into the status, moving the primary epoch on when
// the primary changes cluster, and tells the user what moved.
func (r *Reconciler) applyDecision(dbc *dbfleetv1alpha1.DatabaseCluster, d placement.Decision, now time.Time) {
	old := map[string]int32{}
	for _, p := range dbc.Status.Placements {
		old[p.Cluster] = p.Replicas
	}
	byCluster := map[string]dbfleetv1alpha1.ClusterPlacement{}
	for _, p := range dbc.Status.Placements {
		byCluster[p.Cluster] = p
	}
	placements := make([]dbfleetv1alpha1.ClusterPlacement, 0, len(d.Shares))
	var moves []string
	for _, share := range d.Shares {
		p := byCluster[share.Cluster] // keeps the last aggregated readiness until aggregate runs
		p.Cluster, p.Replicas, p.Ordinals = share.Cluster, share.Replicas, share.Ordinals
		p.Role = dbfleetv1alpha1.RoleReplica
		if share.Cluster == d.Primary {
			p.Role = dbfleetv1alpha1.RolePrimary
		}
		placements = append(placements, p)
		if was := old[share.Cluster]; was != share.Replicas {
			moves = append(moves, fmt.Sprintf("%s %d→%d", share.Cluster, was, share.Replicas))
		}
		delete(old, share.Cluster)
	}
	for cluster, was := range old {
		moves = append(moves, fmt.Sprintf("%s %d→0", cluster, was))
	}
	slices.Sort(moves)
	dbc.Status.Placements = placements

	names := make([]string, len(placements))
	for i, p := range placements {
		names[i] = p.Cluster
	}
	dbc.Status.Clusters = strings.Join(names, ",")

	if d.Primary != "" && (dbc.Status.Primary == nil || dbc.Status.Primary.Cluster != d.Primary) {
		epoch := int64(1)
		from := "none"
		if dbc.Status.Primary != nil {
			epoch = dbc.Status.Primary.Epoch + 1
			from = dbc.Status.Primary.Cluster
		}
		since := metav1.NewTime(now)
		dbc.Status.Primary = &dbfleetv1alpha1.PrimaryStatus{Cluster: d.Primary, Epoch: epoch, Since: &since}
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "PrimaryChanged", "Schedule",
			"primary moved from %s to %s at epoch %d", from, d.Primary, epoch)
	}

	msg := scheduledMessage(d)
	r.setScheduled(dbc, metav1.ConditionTrue, ReasonScheduled, msg)
	if len(moves) > 0 {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, "ReplicasMoved", "Schedule", "%s (%s)", strings.Join(moves, ", "), msg)
	}
}

func scheduledMessage(d placement.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d replicas on", d.TotalReplicas())
	for i, share := range d.Shares {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s(%d)", share.Cluster, share.Replicas)
	}
	if d.Primary != "" {
		fmt.Fprintf(&b, "; primary on %s", d.Primary)
	}
	if len(d.Excluded) > 0 {
		b.WriteString("; not chosen:")
		for i, e := range d.Excluded {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s (%s)", e.Cluster, e.Reason)
		}
	}
	return b.String()
}

// setScheduled sets the Scheduled condition and reports whether it changed.
func (r *Reconciler) setScheduled(dbc *dbfleetv1alpha1.DatabaseCluster, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(&dbc.Status.Conditions, metav1.Condition{
		Type: dbfleetv1alpha1.ConditionScheduled, Status: status, Reason: reason, Message: message,
		ObservedGeneration: dbc.Generation,
	})
}

// previousDecision rebuilds the decision in force from the status, so the engine can keep it.
func previousDecision(dbc *dbfleetv1alpha1.DatabaseCluster) *placement.Decision {
	if len(dbc.Status.Placements) == 0 {
		return nil
	}
	d := &placement.Decision{Shares: make([]placement.Share, 0, len(dbc.Status.Placements))}
	for _, p := range dbc.Status.Placements {
		d.Shares = append(d.Shares, placement.Share{Cluster: p.Cluster, Replicas: p.Replicas, Ordinals: p.Ordinals})
	}
	if dbc.Status.Primary != nil {
		d.Primary = dbc.Status.Primary.Cluster
	}
	return d
}

// clusterSnapshot turns MemberClusters into the engine's view, with each cluster's room for more
// replicas of a database requesting `requests`.
func clusterSnapshot(members map[string]*dbfleetv1alpha1.MemberCluster, requests corev1.ResourceList) []placement.Cluster {
	clusters := make([]placement.Cluster, 0, len(members))
	for _, mc := range members {
		available, limited := placement.AvailableReplicas(mc.Status.ResourceSummary, requests)
		clusters = append(clusters, placement.Cluster{
			Name:              mc.Name,
			Labels:            mc.Labels,
			Region:            mc.Spec.Region,
			Zone:              mc.Spec.Zone,
			Provider:          mc.Spec.Provider,
			Taints:            mc.Spec.Taints,
			Ready:             meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady),
			AvailableReplicas: available,
			Unlimited:         !limited,
		})
	}
	return clusters
}

// requeueForTaints returns how long until the earliest toleration of a NoExecute taint runs out,
// so that the eviction happens on time even if nothing else changes; zero when none is pending.
func requeueForTaints(members map[string]*dbfleetv1alpha1.MemberCluster, tolerations []corev1.Toleration, now time.Time) time.Duration {
	var next time.Duration
	for _, mc := range members {
		for i := range mc.Spec.Taints {
			taint := &mc.Spec.Taints[i]
			if taint.Effect != corev1.TaintEffectNoExecute || taint.TimeAdded == nil {
				continue
			}
			for j := range tolerations {
				tol := &tolerations[j]
				if tol.TolerationSeconds == nil || !tol.ToleratesTaint(logr.Discard(), taint, false) {
					continue
				}
				left := taint.TimeAdded.Add(time.Duration(*tol.TolerationSeconds) * time.Second).Sub(now)
				if left > 0 && (next == 0 || left < next) {
					next = left
				}
			}
		}
	}
	return next
}
