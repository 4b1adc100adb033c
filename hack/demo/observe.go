package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// A snapshot is what the demo sees at one moment: the DatabaseCluster and MemberClusters on the
// hub, and the database's pods in every member, read with the member's own kubeconfig.

type memberView struct {
	name        string
	ready       string // the MemberCluster's Ready status: True, False, Unknown, or "-"
	readyReason string
	readyMsg    string
	taints      []string // key:effect
	pods        int      // the database's pods that are not terminating
	podsReady   int
	primaryPods []string // pods labelled dbfleet.io/role=primary
	fencedPods  []string // pods labelled dbfleet.io/role=fenced
	err         string   // the member API server could not be read

	// The member-local Lease dbfleet-primary-<db>: a database may write as primary only while it
	// is unexpired and names its cluster and epoch (docs/failover.md).
	leaseHolder string
	leaseExpiry time.Time
	leaseValid  bool
}

type snapshot struct {
	at      time.Time
	db      *dbfleetv1alpha1.DatabaseCluster // nil while it does not exist
	members []memberView
	hubErr  string
}

func (f *federation) observe(ctx context.Context) *snapshot {
	s := &snapshot{at: time.Now()}
	db := &dbfleetv1alpha1.DatabaseCluster{}
	switch err := f.hub.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: demoDatabase}, db); {
	case err == nil:
		s.db = db
	case !apierrors.IsNotFound(err):
		s.hubErr = err.Error()
	}
	mcs := &dbfleetv1alpha1.MemberClusterList{}
	if err := f.hub.List(ctx, mcs); err != nil && s.hubErr == "" {
		s.hubErr = err.Error()
	}
	for _, name := range f.members {
		v := memberView{name: name, ready: "-"}
		for i := range mcs.Items {
			mc := &mcs.Items[i]
			if mc.Name != name {
				continue
			}
			if c := meta.FindStatusCondition(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady); c != nil {
				v.ready, v.readyReason, v.readyMsg = string(c.Status), c.Reason, c.Message
			}
			for _, t := range mc.Spec.Taints {
				v.taints = append(v.taints, t.Key+":"+string(t.Effect))
			}
			slices.Sort(v.taints)
		}
		pods, err := f.clusters[name].CoreV1().Pods(demoNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: dbfleetv1alpha1.LabelDatabase + "=" + demoDatabase})
		if err != nil {
			v.err = err.Error()
		} else {
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				v.pods++
				if podReady(p) {
					v.podsReady++
				}
				switch p.Labels[contract.LabelRole] {
				case contract.PodRolePrimary:
					v.primaryPods = append(v.primaryPods, p.Name)
				case contract.PodRoleFenced:
					v.fencedPods = append(v.fencedPods, p.Name)
				}
			}
			slices.Sort(v.primaryPods)
			slices.Sort(v.fencedPods)
		}
		lease, err := f.clusters[name].CoordinationV1().Leases(demoNamespace).Get(ctx, primaryLease, metav1.GetOptions{})
		if err == nil && lease.Spec.HolderIdentity != nil {
			v.leaseHolder = *lease.Spec.HolderIdentity
			if lease.Spec.RenewTime != nil && lease.Spec.LeaseDurationSeconds != nil {
				v.leaseExpiry = lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
				v.leaseValid = v.leaseExpiry.After(s.at)
			}
		}
		s.members = append(s.members, v)
	}
	return s
}

// primaryLease is the member-local Lease of the demo database's primary.
var primaryLease = contract.PrimaryLeaseName(demoDatabase)

// validLeases are the unexpired primary Leases, as "member: holder".
func (s *snapshot) validLeases() []string {
	var out []string
	for _, m := range s.members {
		if m.leaseValid {
			out = append(out, m.name+": "+m.leaseHolder)
		}
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// placement is the database's share on a cluster, or nil.
func (s *snapshot) placement(cluster string) *dbfleetv1alpha1.ClusterPlacement {
	if s.db == nil {
		return nil
	}
	for i := range s.db.Status.Placements {
		if s.db.Status.Placements[i].Cluster == cluster {
			return &s.db.Status.Placements[i]
		}
	}
	return nil
}

func (s *snapshot) member(name string) *memberView {
	for i := range s.members {
		if s.members[i].name == name {
			return &s.members[i]
		}
	}
	return nil
}

// condition is the database's condition of a type, or nil.
func (s *snapshot) condition(t string) *metav1.Condition {
	if s.db == nil {
		return nil
	}
	return meta.FindStatusCondition(s.db.Status.Conditions, t)
}

func (s *snapshot) conditionIs(t string, status metav1.ConditionStatus) bool {
	c := s.condition(t)
	return c != nil && c.Status == status && c.ObservedGeneration == s.db.Generation
}

// primary is the primary cluster and epoch the hub reports.
func (s *snapshot) primary() (string, int64) {
	if s.db == nil || s.db.Status.Primary == nil {
		return "", 0
	}
	return s.db.Status.Primary.Cluster, s.db.Status.Primary.Epoch
}

// shares is "east 3, west 1, central 1" in the members' order.
func (s *snapshot) shares() string {
	var parts []string
	for _, m := range s.members {
		if p := s.placement(m.name); p != nil && p.Replicas > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", m.name, p.Replicas))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// converged: every replica is placed and Ready where it is placed, each member runs exactly its
// share's pods, the hub says Available, and nothing is progressing.
func (s *snapshot) converged() bool {
	if s.db == nil || s.db.Status.ObservedGeneration != s.db.Generation || s.db.Status.ReadyReplicas != s.db.Spec.Replicas {
		return false
	}
	if !s.conditionIs(dbfleetv1alpha1.ConditionAvailable, metav1.ConditionTrue) ||
		!s.conditionIs(dbfleetv1alpha1.ConditionProgressing, metav1.ConditionFalse) {
		return false
	}
	for _, m := range s.members {
		want := int32(0)
		if p := s.placement(m.name); p != nil {
			want = p.Replicas
		}
		if m.err != "" || int32(m.pods) != want || int32(m.podsReady) != want {
			return false
		}
	}
	return true
}
