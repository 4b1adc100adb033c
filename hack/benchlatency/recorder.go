package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// recorder keeps, per database, when the benchmark first saw each step, from watch events.
type recorder struct {
	mu        sync.Mutex
	changed   chan struct{}
	createdAt map[string]time.Time
	// stsAt[db][member][replicas]: when a StatefulSet of that many replicas was first seen.
	stsAt map[string]map[string]map[int32]time.Time
	// readyAt[db][member][n]: when n of the database's Pods there were first seen Ready.
	readyAt map[string]map[string]map[int32]time.Time
	// podReady[member][pod]: the database of each Ready pod.
	podReady    map[string]map[string]string
	availableAt map[string]time.Time
	// mdbAt[db][member]: when the hub's MemberDatabase for the member was first seen.
	mdbAt      map[string]map[string]time.Time
	placements map[string][]dbfleetv1alpha1.ClusterPlacement
}

func newRecorder() *recorder {
	return &recorder{
		changed:   make(chan struct{}, 1),
		createdAt: map[string]time.Time{}, stsAt: map[string]map[string]map[int32]time.Time{},
		readyAt: map[string]map[string]map[int32]time.Time{}, podReady: map[string]map[string]string{},
		availableAt: map[string]time.Time{}, mdbAt: map[string]map[string]time.Time{}, placements: map[string][]dbfleetv1alpha1.ClusterPlacement{},
	}
}

func (r *recorder) created(db string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.createdAt[db] = at
}

func first(m map[string]map[string]map[int32]time.Time, db, member string, n int32, at time.Time) {
	if m[db] == nil {
		m[db] = map[string]map[int32]time.Time{}
	}
	if m[db][member] == nil {
		m[db][member] = map[int32]time.Time{}
	}
	if _, seen := m[db][member][n]; !seen {
		m[db][member][n] = at
	}
}

func (r *recorder) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) statefulSet(member string, sts *appsv1.StatefulSet) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	first(r.stsAt, sts.Name, member, ptr.Deref(sts.Spec.Replicas, 1), now)
	r.notify()
}

func (r *recorder) pod(member string, pod *corev1.Pod) {
	now := time.Now()
	db := pod.Labels[dbfleetv1alpha1.LabelDatabase]
	if db == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.podReady[member] == nil {
		r.podReady[member] = map[string]string{}
	}
	ready := pod.DeletionTimestamp.IsZero()
	if ready {
		c := podCondition(pod, corev1.PodReady)
		ready = c != nil && c.Status == corev1.ConditionTrue
	}
	if ready {
		r.podReady[member][pod.Name] = db
	} else {
		delete(r.podReady[member], pod.Name)
	}
	var n int32
	for _, d := range r.podReady[member] {
		if d == db {
			n++
		}
	}
	if n > 0 {
		first(r.readyAt, db, member, n, now)
	}
	r.notify()
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func (r *recorder) memberDatabase(mdb *dbfleetv1alpha1.MemberDatabase) {
	now := time.Now()
	if mdb.Spec.DatabaseRef.Namespace != namespace {
		return
	}
	db, member := mdb.Spec.DatabaseRef.Name, mdb.Labels[dbfleetv1alpha1.LabelCluster]
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mdbAt[db] == nil {
		r.mdbAt[db] = map[string]time.Time{}
	}
	if _, seen := r.mdbAt[db][member]; !seen {
		r.mdbAt[db][member] = now
	}
	r.notify()
}

func (r *recorder) database(dbc *dbfleetv1alpha1.DatabaseCluster) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(dbc.Status.Placements) > 0 {
		r.placements[dbc.Name] = dbc.Status.Placements
	}
	available := dbc.Status.ReadyReplicas == dbc.Spec.Replicas && meta.IsStatusConditionTrue(dbc.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
	if _, seen := r.availableAt[dbc.Name]; available && !seen {
		r.availableAt[dbc.Name] = now
	}
	r.notify()
}

// stepsLocked are a database's figures, and whether all are known yet.
func (r *recorder) stepsLocked(db string) ([nSteps]time.Duration, bool) {
	var out [nSteps]time.Duration
	created, ok := r.createdAt[db]
	placements := r.placements[db]
	available, isAvailable := r.availableAt[db]
	if !ok || len(placements) == 0 || !isAvailable {
		return out, false
	}
	var sts, pods, mdbs time.Time
	for _, p := range placements {
		s, seen := r.stsAt[db][p.Cluster][p.Replicas]
		q, ready := r.readyAt[db][p.Cluster][p.Replicas]
		m, written := r.mdbAt[db][p.Cluster]
		if !seen || !ready || !written {
			return out, false
		}
		sts, pods, mdbs = later(sts, s), later(pods, q), later(mdbs, m)
	}
	return [nSteps]time.Duration{sts.Sub(created), pods.Sub(created), available.Sub(created), available.Sub(pods), mdbs.Sub(created)}, true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (r *recorder) createdTime(db string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.createdAt[db]
}

func (r *recorder) steps(db string) [nSteps]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, _ := r.stepsLocked(db)
	return s
}

// await waits until every database of dbs has all its figures.
func (r *recorder) await(ctx context.Context, timeout time.Duration, dbs []string) error {
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		left := 0
		for _, db := range dbs {
			if _, done := r.stepsLocked(db); !done {
				left++
			}
		}
		r.mu.Unlock()
		if left == 0 {
			return nil
		}
		select {
		case <-r.changed:
		case <-time.After(time.Second):
		case <-deadline:
			return fmt.Errorf("%d of %d databases not through every step after %s", left, len(dbs), timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
