package databasecluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// propagate makes the MemberDatabases match status.placements and status.evictions: one per
// placed cluster, one per kept evicted share (as replicas, labelled dbfleet.io/evicting), written
// into member-<cluster>, and none elsewhere. Failures are kept per cluster for the Propagated
// condition and reported as Events; the returned error makes the reconcile retry with backoff.
func (r *Reconciler) propagate(ctx context.Context, s *scope) error {
	dbc := s.dbc
	keep := map[string]bool{}
	repl := replicationOf(s)
	network := func(cluster string) dbfleetv1alpha1.DatabaseNetwork {
		if mc := s.members[cluster]; mc != nil && mc.Spec.DatabaseNetwork != dbfleetv1alpha1.DatabaseNetworkPodIP {
			return mc.Spec.DatabaseNetwork
		}
		return ""
	}
	for _, p := range dbc.Status.Placements {
		keep[p.Cluster] = true
		desired := desiredMemberDatabase(dbc, p)
		s.roll.apply(&desired.Spec.Database, p.Cluster, s.memberDBs[p.Cluster])
		desired.Spec.Network = network(p.Cluster)
		if d := s.demotion; d != nil && d.cluster == p.Cluster {
			desired.Spec.Role, desired.Spec.Epoch = dbfleetv1alpha1.RoleReplica, d.epoch
		}
		if existing := s.memberDBs[p.Cluster]; existing != nil && existing.Spec.Epoch > desired.Spec.Epoch {
			// A share told to step down at a higher epoch (a demotion whose move is held or was
			// dropped) stays as told: its agent never acts on a lower epoch, and the move either
			// goes on at that epoch or the primary is promoted again above it
			// (repromoteAbandonedDemotion).
			desired.Spec.Role, desired.Spec.Epoch = existing.Spec.Role, existing.Spec.Epoch
		}
		if desired.Spec.Role == dbfleetv1alpha1.RolePrimary {
			desired.Spec.PrimaryOrdinal = primaryOrdinalOf(dbc, p.Cluster)
			if o := desired.Spec.PrimaryOrdinal; o != nil && (*o < p.Ordinals.Start || *o >= p.Ordinals.Start+p.Replicas) {
				// A StatefulSet scales down from its highest ordinal: it would remove the primary.
				s.propagationErrors[p.Cluster] = fmt.Errorf("the share would shrink to ordinals %d-%d without its primary pod %s: kept as it is until the primary moves",
					p.Ordinals.Start, p.Ordinals.Start+p.Replicas-1, contract.PodName(dbc.Name, *o))
				continue
			}
			if dbc.Status.Primary != nil && desired.Spec.Epoch == dbc.Status.Primary.Epoch {
				// In the same write as the role and the epoch: the agent hands both to the pods in
				// one patch, so the new primary never promotes without it.
				desired.Spec.PromoteAfterLSN = dbc.Status.Primary.PromoteAfterLSN
			}
		}
		repl.apply(desired, p.Cluster)
		if err := r.writeMemberDatabase(ctx, s, p.Cluster, desired); err != nil {
			s.propagationErrors[p.Cluster] = err
		}
	}
	for _, e := range dbc.Status.Evictions {
		keep[e.Cluster] = true
		desired := desiredMemberDatabase(dbc, dbfleetv1alpha1.ClusterPlacement{
			Cluster: e.Cluster, Replicas: e.Replicas, Ordinals: e.Ordinals, Role: dbfleetv1alpha1.RoleReplica})
		desired.Labels[dbfleetv1alpha1.LabelEvicting] = "true"
		s.roll.apply(&desired.Spec.Database, e.Cluster, s.memberDBs[e.Cluster])
		desired.Spec.Network = network(e.Cluster)
		repl.apply(desired, e.Cluster)
		if s.memberDBs[e.Cluster] == nil {
			continue // never re-create a share that is leaving
		}
		if err := r.writeMemberDatabase(ctx, s, e.Cluster, desired); err != nil {
			s.propagationErrors[e.Cluster] = err
		}
	}
	for cluster, mdb := range s.memberDBs {
		if keep[cluster] || !mdb.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, mdb); client.IgnoreNotFound(err) != nil {
			s.propagationErrors[cluster] = fmt.Errorf("remove share: %w", err)
			continue
		}
		memberDatabaseWrites.WithLabelValues("delete").Inc()
		ctrl.LoggerFrom(ctx).Info("Removed share", "cluster", cluster)
	}
	if len(s.propagationErrors) == 0 {
		return nil
	}
	clusters := make([]string, 0, len(s.propagationErrors))
	for cluster := range s.propagationErrors {
		clusters = append(clusters, cluster)
	}
	slices.Sort(clusters)
	for _, cluster := range clusters {
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeWarning, "PropagationFailed", "Propagate",
			"%s", truncate(fmt.Sprintf("cluster %s: %v", cluster, s.propagationErrors[cluster])))
	}
	return fmt.Errorf("%w for clusters %v", errPropagation, clusters)
}

// writeMemberDatabase creates or updates one cluster's MemberDatabase, writing nothing when it
// is already as desired.
func (r *Reconciler) writeMemberDatabase(ctx context.Context, s *scope, cluster string, desired *dbfleetv1alpha1.MemberDatabase) error {
	dbc := s.dbc
	existing := s.memberDBs[cluster]
	if existing == nil {
		if err := r.Client.Create(ctx, desired); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s does not exist: is cluster %s joined?", desired.Namespace, cluster)
			}
			if apierrors.IsAlreadyExists(err) {
				// Our cache is behind a write of our own (or of a previous leader): the next
				// reconcile sees it and updates it in place.
				return nil
			}
			return fmt.Errorf("create MemberDatabase: %w", err)
		}
		memberDatabaseWrites.WithLabelValues("create").Inc()
		s.memberDBs[cluster] = desired
		return nil
	}
	if !existing.DeletionTimestamp.IsZero() {
		return fmt.Errorf("previous share is still being removed; waiting for the agent to finish")
	}
	if existing.Spec.DatabaseRef.UID != dbc.UID {
		return fmt.Errorf("MemberDatabase %s/%s belongs to an earlier DatabaseCluster of the same name that is still being removed", existing.Namespace, existing.Name)
	}
	if equality.Semantic.DeepEqual(existing.Spec, desired.Spec) && labelsMatch(existing.Labels, desired.Labels) {
		return nil
	}
	updated := existing.DeepCopy()
	updated.Spec = desired.Spec
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		updated.Labels[k] = v
	}
	if err := r.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("update MemberDatabase: %w", err)
	}
	memberDatabaseWrites.WithLabelValues("update").Inc()
	s.memberDBs[cluster] = updated
	return nil
}

// desiredMemberDatabase is the MemberDatabase a placement calls for.
func desiredMemberDatabase(dbc *dbfleetv1alpha1.DatabaseCluster, p dbfleetv1alpha1.ClusterPlacement) *dbfleetv1alpha1.MemberDatabase {
	var epoch int64 = 1
	if dbc.Status.Primary != nil && dbc.Status.Primary.Epoch > 0 {
		epoch = dbc.Status.Primary.Epoch
	}
	role := p.Role
	if role == "" {
		role = dbfleetv1alpha1.RoleReplica
	}
	return &dbfleetv1alpha1.MemberDatabase{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: dbfleetv1alpha1.MemberNamespace(p.Cluster),
			Name:      dbfleetv1alpha1.MemberDatabaseName(dbc.Namespace, dbc.Name),
			Labels: map[string]string{
				dbfleetv1alpha1.LabelCluster:           p.Cluster,
				dbfleetv1alpha1.LabelDatabase:          dbc.Name,
				dbfleetv1alpha1.LabelDatabaseNamespace: dbc.Namespace,
			},
			// The agent's cleanup finalizer is set at create: the agent would add it before
			// applying anything anyway, and one write fewer per share is what placement
			// throughput is made of when the hub API server is the bottleneck.
			Finalizers: []string{dbfleetv1alpha1.MemberDatabaseFinalizer},
		},
		Spec: dbfleetv1alpha1.MemberDatabaseSpec{
			DatabaseRef: dbfleetv1alpha1.DatabaseReference{Namespace: dbc.Namespace, Name: dbc.Name, UID: dbc.UID},
			Database:    *dbc.Spec.DatabaseTemplate.DeepCopy(),
			Replicas:    p.Replicas,
			Ordinals:    dbfleetv1alpha1.MemberOrdinals{Start: p.Ordinals.Start},
			Role:        role,
			Epoch:       epoch,
		},
	}
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
