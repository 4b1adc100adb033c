package e2e

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// What the tests read back: the hub's DatabaseCluster and MemberDatabases, and what each member
// runs of a database (its StatefulSet, Pods and primary Lease), read through the members' own
// API servers.

func (f *federation) database(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster) (*dbfleetv1alpha1.DatabaseCluster, error) {
	d := &dbfleetv1alpha1.DatabaseCluster{}
	return d, f.hub.Get(ctx, client.ObjectKeyFromObject(dbc), d)
}

// share is what one member runs of one database.
type share struct {
	member string
	sts    *appsv1.StatefulSet // nil when there is none
	pods   []corev1.Pod
	lease  *coordinationv1.Lease // the primary Lease dbfleet-primary-<db>; nil when there is none
}

func (f *federation) share(ctx context.Context, member, ns, db string) (share, error) {
	c, s := f.clusters[member], share{member: member}
	sts, lease := &appsv1.StatefulSet{}, &coordinationv1.Lease{}
	if found, err := get(ctx, c, client.ObjectKey{Namespace: ns, Name: db}, sts); err != nil {
		return s, err
	} else if found {
		s.sts = sts
	}
	if found, err := get(ctx, c, client.ObjectKey{Namespace: ns, Name: contract.PrimaryLeaseName(db)}, lease); err != nil {
		return s, err
	} else if found {
		s.lease = lease
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{dbfleetv1alpha1.LabelDatabase: db}); err != nil {
		return s, fmt.Errorf("%s: %w", member, err)
	}
	s.pods = pods.Items
	return s, nil
}

// get reads obj, reporting whether it exists.
func get(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object) (bool, error) {
	err := c.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ready counts the share's Ready Pods (not terminating).
func (s share) ready() int32 {
	var n int32
	for i := range s.pods {
		if podReady(&s.pods[i]) {
			n++
		}
	}
	return n
}

// primaries are the share's Pods labelled dbfleet.io/role=primary (a fenced one is "fenced").
func (s share) primaries() []string {
	var out []string
	for _, p := range s.pods {
		if p.Labels[contract.LabelRole] == contract.PodRolePrimary {
			out = append(out, p.Name)
		}
	}
	return out
}

// leaseExpiry is when the share's primary Lease runs out (zero without a Lease).
func (s share) leaseExpiry() time.Time {
	l := s.lease
	if l == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

func (s share) holder() string {
	if s.lease == nil || s.lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *s.lease.Spec.HolderIdentity
}

// converged fails, saying why, unless the hub and the members agree on dbc: Scheduled and
// Available at the current generation with every replica Ready; each placed member runs exactly
// its share (StatefulSet with the share's replicas and first ordinal, that many Pods, all Ready)
// and has its MemberDatabase; a member without a share runs nothing of it and has none; and there
// is one primary, status.primary.pod in the primary cluster's share, labelled primary and holding
// the unexpired Lease <cluster>/<epoch>, while no other member has a Pod labelled primary or an
// unexpired Lease; and no evicted share is kept any more. Members in skip (whose agents are
// stopped or cut off) are not inspected.
func (f *federation) converged(ctx context.Context, dbc *dbfleetv1alpha1.DatabaseCluster, skip ...string) error {
	d, err := f.database(ctx, dbc)
	if err != nil {
		return err
	}
	st := d.Status
	switch {
	case st.ObservedGeneration != d.Generation:
		return fmt.Errorf("hub has observed generation %d of %d", st.ObservedGeneration, d.Generation)
	case !meta.IsStatusConditionTrue(st.Conditions, dbfleetv1alpha1.ConditionScheduled):
		return fmt.Errorf("not Scheduled: %v", meta.FindStatusCondition(st.Conditions, dbfleetv1alpha1.ConditionScheduled))
	case st.ReadyReplicas != d.Spec.Replicas:
		return fmt.Errorf("hub reports %d of %d ready: %+v", st.ReadyReplicas, d.Spec.Replicas, st.Placements)
	case !meta.IsStatusConditionTrue(st.Conditions, dbfleetv1alpha1.ConditionAvailable):
		return fmt.Errorf("not Available: %v", meta.FindStatusCondition(st.Conditions, dbfleetv1alpha1.ConditionAvailable))
	case st.Primary == nil:
		return fmt.Errorf("no primary")
	}
	placed := map[string]dbfleetv1alpha1.ClusterPlacement{}
	for _, p := range st.Placements {
		placed[p.Cluster] = p
	}
	// A share kept after its eviction goes once its replacements are Ready; on a member whose
	// agent is stopped it may stay (Never, or its MemberDatabase waits for the agent).
	for _, e := range st.Evictions {
		if !slices.Contains(skip, e.Cluster) {
			return fmt.Errorf("the share evicted from %s (%s) is still kept", e.Cluster, e.Reason)
		}
	}
	for _, m := range membersExcept(skip...) {
		if err := f.shareConverged(ctx, d, m, placed); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	}
	return nil
}

func (f *federation) shareConverged(ctx context.Context, d *dbfleetv1alpha1.DatabaseCluster, m string, placed map[string]dbfleetv1alpha1.ClusterPlacement) error {
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	hasMDB, err := get(ctx, f.hub, client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(m),
		Name: dbfleetv1alpha1.MemberDatabaseName(d.Namespace, d.Name)}, mdb)
	if err != nil {
		return err
	}
	s, err := f.share(ctx, m, d.Namespace, d.Name)
	if err != nil {
		return err
	}
	now := time.Now()
	p, isPlaced := placed[m]
	if !isPlaced {
		switch {
		case hasMDB:
			return fmt.Errorf("no share placed, but its MemberDatabase is still on the hub")
		case s.sts != nil || len(s.pods) > 0:
			return fmt.Errorf("no share placed, but it runs a StatefulSet (%t) and %d Pods", s.sts != nil, len(s.pods))
		case now.Before(s.leaseExpiry()):
			return fmt.Errorf("no share placed, but it holds an unexpired primary Lease (%s)", s.holder())
		}
		return nil
	}
	switch {
	case !hasMDB:
		return fmt.Errorf("no MemberDatabase on the hub")
	case s.sts == nil:
		return fmt.Errorf("no StatefulSet yet")
	case s.sts.Spec.Replicas == nil || *s.sts.Spec.Replicas != p.Replicas || s.sts.Spec.Ordinals == nil || s.sts.Spec.Ordinals.Start != p.Ordinals.Start:
		return fmt.Errorf("StatefulSet %v replicas from ordinal %v, want %d from %d", s.sts.Spec.Replicas, s.sts.Spec.Ordinals, p.Replicas, p.Ordinals.Start)
	case int32(len(s.pods)) != p.Replicas || s.ready() != p.Replicas:
		return fmt.Errorf("%d Pods, %d Ready, want %d", len(s.pods), s.ready(), p.Replicas)
	}
	primary := d.Status.Primary
	if m != primary.Cluster {
		if got := s.primaries(); len(got) > 0 {
			return fmt.Errorf("replica share has Pods labelled primary: %v", got)
		}
		if now.Before(s.leaseExpiry()) {
			return fmt.Errorf("replica share holds an unexpired primary Lease (%s)", s.holder())
		}
		return nil
	}
	want := primary.Pod
	if want == "" {
		want = fmt.Sprintf("%s-%d", d.Name, p.Ordinals.Start) // a status from before status.primary.pod
	}
	if got := s.primaries(); !slices.Equal(got, []string{want}) {
		return fmt.Errorf("Pods labelled primary: %v, want [%s]", got, want)
	}
	if holder := contract.Holder(m, primary.Epoch); s.holder() != holder || !now.Before(s.leaseExpiry()) {
		return fmt.Errorf("primary Lease held by %q until %s, want %q unexpired", s.holder(), s.leaseExpiry().Format(time.StampMilli), holder)
	}
	return nil
}

// leftovers lists what remains of a deleted database in a member (and of its share on the hub).
func (f *federation) leftovers(ctx context.Context, m, ns, db string) ([]string, error) {
	c := f.clusters[m]
	var left []string
	for _, o := range []struct {
		kind string
		obj  client.Object
		key  client.ObjectKey
	}{
		{"StatefulSet", &appsv1.StatefulSet{}, client.ObjectKey{Namespace: ns, Name: db}},
		{"Service", &corev1.Service{}, client.ObjectKey{Namespace: ns, Name: db}},
		{"PodDisruptionBudget", &policyv1.PodDisruptionBudget{}, client.ObjectKey{Namespace: ns, Name: db + "-primary"}},
		{"PodDisruptionBudget", &policyv1.PodDisruptionBudget{}, client.ObjectKey{Namespace: ns, Name: db + "-replica"}},
		{"Lease", &coordinationv1.Lease{}, client.ObjectKey{Namespace: ns, Name: contract.PrimaryLeaseName(db)}},
	} {
		found, err := get(ctx, c, o.key, o.obj)
		if err != nil {
			return nil, err
		}
		if found {
			left = append(left, o.kind+" "+o.key.Name)
		}
	}
	pods, pvcs := &corev1.PodList{}, &corev1.PersistentVolumeClaimList{}
	for _, list := range []client.ObjectList{pods, pvcs} {
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{dbfleetv1alpha1.LabelDatabase: db}); err != nil {
			return nil, err
		}
	}
	for _, p := range pods.Items {
		left = append(left, "Pod "+p.Name)
	}
	for _, p := range pvcs.Items {
		left = append(left, "PersistentVolumeClaim "+p.Name)
	}
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(m), Name: dbfleetv1alpha1.MemberDatabaseName(ns, db)}
	if found, err := get(ctx, f.hub, key, mdb); err != nil {
		return nil, err
	} else if found {
		left = append(left, "MemberDatabase "+key.String()+" on the hub")
	}
	return left, nil
}
