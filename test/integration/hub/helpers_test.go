package hub

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/test/framework"
)

// suiteLabel keeps each test's MemberClusters apart: every policy in a test selects only the
// clusters carrying its test's value, so tests sharing the API server do not see each other.
const suiteLabel = "dbfleet.test/suite"

// fixture is one test's corner of the shared hub.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	c     client.Client
	suite string
	ns    string

	// clusters are this fixture's MemberClusters; silent those whose simulated agent does not
	// confirm cleanup (see cleanUpAsAgents).
	mu       sync.Mutex
	clusters []string
	silent   map[string]bool
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	suite := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(suite) > 40 {
		suite = suite[:40]
	}
	suite = strings.Trim(suite, "-")
	f := &fixture{t: t, ctx: context.Background(), c: env.Client, suite: suite, ns: suite, silent: map[string]bool{}}
	f.createNamespace(f.ns)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.cleanUpAsAgents(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done; f.removeMembers() })
	return f
}

// removeMembers deletes the fixture's MemberClusters once its test is done (and its hub
// stopped), finalizers and all. The hub counts every MemberCluster when it judges how many are
// down at once (--unhealthy-cluster-threshold): the lost clusters of earlier tests would pause
// the evictions of later ones.
func (f *fixture) removeMembers() {
	f.mu.Lock()
	clusters := slices.Clone(f.clusters)
	f.mu.Unlock()
	for _, name := range clusters {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			mc := &dbfleetv1alpha1.MemberCluster{}
			if err := f.c.Get(context.Background(), client.ObjectKey{Name: name}, mc); err != nil {
				return client.IgnoreNotFound(err)
			}
			if len(mc.Finalizers) > 0 {
				mc.Finalizers = nil
				if err := f.c.Update(context.Background(), mc); err != nil {
					return err
				}
			}
			return client.IgnoreNotFound(f.c.Delete(context.Background(), mc))
		})
		if err != nil {
			f.t.Errorf("remove MemberCluster %s: %v", name, err)
		}
	}
}

// cleanUpAsAgents plays the agents' part in deletion until ctx ends: the hub creates every
// MemberDatabase with the agent's cleanup finalizer, and an agent drops it once the share is
// gone from its member cluster. Here that happens at once, except on clusters made silent.
func (f *fixture) cleanUpAsAgents(ctx context.Context) {
	for {
		f.cleanUpPass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cleanUpPass is one pass of cleanUpAsAgents. It holds f.mu throughout, so that silence returns
// only once no pass that began before it can still confirm a cleanup for the silenced cluster.
func (f *fixture) cleanUpPass(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cluster := range f.clusters {
		if f.silent[cluster] {
			continue
		}
		list := &dbfleetv1alpha1.MemberDatabaseList{}
		if err := f.c.List(ctx, list, client.InNamespace(dbfleetv1alpha1.MemberNamespace(cluster))); err != nil {
			continue
		}
		for i := range list.Items {
			mdb := &list.Items[i]
			if mdb.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(mdb, dbfleetv1alpha1.MemberDatabaseFinalizer) {
				continue
			}
			patched := mdb.DeepCopy()
			controllerutil.RemoveFinalizer(patched, dbfleetv1alpha1.MemberDatabaseFinalizer)
			_ = f.c.Patch(ctx, patched, client.MergeFromWithOptions(mdb, client.MergeFromWithOptimisticLock{}))
		}
	}
}

// silence makes the cluster's simulated agent stop confirming cleanup (or resume, with false).
func (f *fixture) silence(cluster string, silent bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.silent[cluster] = silent
}

func (f *fixture) createNamespace(name string) {
	f.t.Helper()
	err := f.c.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatal(err)
	}
}

// member joins a cluster as `hub join` would (MemberCluster and member namespace) and reports it
// Ready with the given free capacity, as its agent would. Names are prefixed with the suite.
func (f *fixture) member(name, region string, cpus int64) string {
	f.t.Helper()
	full := strings.Trim(clusterPrefix(f.suite)+"-"+name, "-")
	mc := &dbfleetv1alpha1.MemberCluster{
		ObjectMeta: metav1.ObjectMeta{Name: full, Labels: map[string]string{suiteLabel: f.suite}},
		Spec:       dbfleetv1alpha1.MemberClusterSpec{Region: region, Zone: region + "-a"},
	}
	if err := f.c.Create(f.ctx, mc); err != nil {
		f.t.Fatal(err)
	}
	f.createNamespace(dbfleetv1alpha1.MemberNamespace(full))
	f.mu.Lock()
	f.clusters = append(f.clusters, full)
	f.mu.Unlock()
	mc.Status.ResourceSummary = &dbfleetv1alpha1.ResourceSummary{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(cpus, resource.DecimalSI)},
	}
	f.setReady(full, metav1.ConditionTrue)
	return full
}

// setReady sets the MemberCluster's Ready condition as the cluster health controller would.
func (f *fixture) setReady(cluster string, status metav1.ConditionStatus) {
	f.t.Helper()
	f.updateMemberStatus(cluster, func(mc *dbfleetv1alpha1.MemberCluster) {
		meta.SetStatusCondition(&mc.Status.Conditions, metav1.Condition{
			Type: dbfleetv1alpha1.ConditionReady, Status: status, Reason: "Test", Message: "set by the test",
		})
		if mc.Status.ResourceSummary == nil {
			mc.Status.ResourceSummary = &dbfleetv1alpha1.ResourceSummary{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")},
			}
		}
	})
}

// updateMemberStatus and updateMember retry on conflict: hub controllers write MemberClusters too.
func (f *fixture) updateMemberStatus(cluster string, change func(*dbfleetv1alpha1.MemberCluster)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := f.c.Get(f.ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			return err
		}
		change(mc)
		return f.c.Status().Update(f.ctx, mc)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) updateMember(cluster string, change func(*dbfleetv1alpha1.MemberCluster)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		mc := &dbfleetv1alpha1.MemberCluster{}
		if err := f.c.Get(f.ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			return err
		}
		change(mc)
		return f.c.Update(f.ctx, mc)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// policy creates a PropagationPolicy in the fixture's namespace that selects DatabaseClusters by
// labels and places them on this suite's clusters with the given replica scheduling.
func (f *fixture) policy(name string, priority int32, match map[string]string, rs *policyv1alpha1.ReplicaSchedulingStrategy) *dbfleetv1alpha1.PropagationPolicy {
	f.t.Helper()
	pp := &dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: dbfleetv1alpha1.PropagationSpec{
			Priority:          &priority,
			ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{LabelSelector: &metav1.LabelSelector{MatchLabels: match}}},
			Placement: policyv1alpha1.Placement{
				ClusterAffinity: &policyv1alpha1.ClusterAffinity{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{suiteLabel: f.suite}},
				},
				ReplicaScheduling: rs,
			},
		},
	}
	if err := f.c.Create(f.ctx, pp); err != nil {
		f.t.Fatal(err)
	}
	return pp
}

func divided() *policyv1alpha1.ReplicaSchedulingStrategy {
	return &policyv1alpha1.ReplicaSchedulingStrategy{
		ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
		ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
	}
}

func (f *fixture) database(name string, replicas int32, labels map[string]string) *dbfleetv1alpha1.DatabaseCluster {
	f.t.Helper()
	dbc := &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: labels},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{
				Engine: dbfleetv1alpha1.EnginePostgres, Version: "16.4",
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1"),
				}},
			},
			Replicas: replicas,
		},
	}
	if err := f.c.Create(f.ctx, dbc); err != nil {
		f.t.Fatal(err)
	}
	return dbc
}

func (f *fixture) getDatabase(name string) *dbfleetv1alpha1.DatabaseCluster {
	f.t.Helper()
	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	if err := f.c.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, dbc); err != nil {
		f.t.Fatal(err)
	}
	return dbc
}

// updateDatabase retries on conflict: the hub writes the object too (its finalizer).
func (f *fixture) updateDatabase(name string, change func(*dbfleetv1alpha1.DatabaseCluster)) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dbc := f.getDatabase(name)
		change(dbc)
		return f.c.Update(f.ctx, dbc)
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// waitDatabase polls the DatabaseCluster until cond holds, failing with the last status seen.
func (f *fixture) waitDatabase(name, what string, cond func(*dbfleetv1alpha1.DatabaseCluster) bool) *dbfleetv1alpha1.DatabaseCluster {
	f.t.Helper()
	dbc := &dbfleetv1alpha1.DatabaseCluster{}
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, what, func(ctx context.Context) (bool, error) {
		if err := f.c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, dbc); err != nil {
			return false, err
		}
		return cond(dbc), nil
	})
	if err != nil {
		f.t.Fatalf("%v\nlast status: %s", err, describe(dbc))
	}
	return dbc
}

func describe(dbc *dbfleetv1alpha1.DatabaseCluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy=%v primary=%v ready=%s clusters=%s placements=%+v", dbc.Status.Policy, dbc.Status.Primary, dbc.Status.Ready, dbc.Status.Clusters, dbc.Status.Placements)
	for _, c := range dbc.Status.Conditions {
		fmt.Fprintf(&b, "\n  %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func hasCondition(dbc *dbfleetv1alpha1.DatabaseCluster, t string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(dbc.Status.Conditions, t)
	return c != nil && c.Status == status && (reason == "" || c.Reason == reason) && c.ObservedGeneration == dbc.Generation
}

// shares maps cluster to replicas from status.placements.
func shares(dbc *dbfleetv1alpha1.DatabaseCluster) map[string]int32 {
	m := map[string]int32{}
	for _, p := range dbc.Status.Placements {
		m[p.Cluster] = p.Replicas
	}
	return m
}

// memberDatabases returns the DatabaseCluster's MemberDatabases by cluster, as they are on the hub.
func (f *fixture) memberDatabases(name string) map[string]*dbfleetv1alpha1.MemberDatabase {
	f.t.Helper()
	list := &dbfleetv1alpha1.MemberDatabaseList{}
	if err := f.c.List(f.ctx, list, client.MatchingLabels{
		dbfleetv1alpha1.LabelDatabase: name, dbfleetv1alpha1.LabelDatabaseNamespace: f.ns,
	}); err != nil {
		f.t.Fatal(err)
	}
	m := map[string]*dbfleetv1alpha1.MemberDatabase{}
	for i := range list.Items {
		mdb := &list.Items[i]
		cluster := mdb.Labels[dbfleetv1alpha1.LabelCluster]
		if _, dup := m[cluster]; dup {
			f.t.Fatalf("two MemberDatabases of %s for cluster %s", name, cluster)
		}
		m[cluster] = mdb
	}
	return m
}

// placedMemberDatabases are the MemberDatabases of placed shares: without the evicted shares
// that are kept until they may be purged.
func (f *fixture) placedMemberDatabases(name string) map[string]*dbfleetv1alpha1.MemberDatabase {
	f.t.Helper()
	m := f.memberDatabases(name)
	for cluster, mdb := range m {
		if mdb.Labels[dbfleetv1alpha1.LabelEvicting] == "true" {
			delete(m, cluster)
		}
	}
	return m
}

// waitMemberDatabases waits until the placed MemberDatabases' replicas per cluster equal want.
func (f *fixture) waitMemberDatabases(name string, want map[string]int32) map[string]*dbfleetv1alpha1.MemberDatabase {
	f.t.Helper()
	var got map[string]*dbfleetv1alpha1.MemberDatabase
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, "MemberDatabases "+fmt.Sprint(want), func(ctx context.Context) (bool, error) {
		got = f.placedMemberDatabases(name)
		if len(got) != len(want) {
			return false, nil
		}
		for cluster, n := range want {
			mdb, ok := got[cluster]
			if !ok || mdb.Spec.Replicas != n || !mdb.DeletionTimestamp.IsZero() {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		have := map[string]int32{}
		for c, m := range got {
			have[c] = m.Spec.Replicas
		}
		f.t.Fatalf("%v; have %v", err, have)
	}
	return got
}

// reportAsAgent writes a MemberDatabase status the way the cluster's agent would.
func (f *fixture) reportAsAgent(mdb *dbfleetv1alpha1.MemberDatabase, ready int32, available bool) {
	f.t.Helper()
	fresh := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(mdb), fresh); err != nil {
		f.t.Fatal(err)
	}
	before := fresh.DeepCopy()
	setAgentStatus(fresh, ready, available)
	if err := f.c.Status().Patch(f.ctx, fresh, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

// setAgentStatus fills a MemberDatabase status as its agent would with ready pods of the
// current template: status.version is the spec's version once every wanted pod is ready (the
// agent's rollout check), the version reported before until then.
func setAgentStatus(mdb *dbfleetv1alpha1.MemberDatabase, ready int32, available bool) {
	mdb.Status.ObservedGeneration = mdb.Generation
	mdb.Status.Epoch = mdb.Spec.Epoch
	mdb.Status.Replicas = mdb.Spec.Replicas
	mdb.Status.ReadyReplicas = ready
	if mdb.Spec.Replicas > 0 && ready >= mdb.Spec.Replicas {
		mdb.Status.Version = mdb.Spec.Database.Version
	}
	status := metav1.ConditionFalse
	if available {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&mdb.Status.Conditions, metav1.Condition{
		Type: dbfleetv1alpha1.ConditionAvailable, Status: status, Reason: "Test", Message: "reported by the test agent",
	})
}

// reportInstances sets the share's status.instances as its agent would from the pods' /status.
func (f *fixture) reportInstances(mdb *dbfleetv1alpha1.MemberDatabase, instances ...dbfleetv1alpha1.InstanceStatus) {
	f.t.Helper()
	fresh := &dbfleetv1alpha1.MemberDatabase{}
	if err := f.c.Get(f.ctx, client.ObjectKeyFromObject(mdb), fresh); err != nil {
		f.t.Fatal(err)
	}
	before := fresh.DeepCopy()
	fresh.Status.Instances = instances
	for i := range fresh.Status.Instances {
		in := &fresh.Status.Instances[i]
		if in.Role != dbfleetv1alpha1.InstanceRunningPrimary && in.PrimarySilenceSeconds == nil {
			// The tests' failovers are of a lost cluster: its primary has long gone silent for
			// every standby, unless a test says otherwise.
			in.PrimarySilenceSeconds = ptr.To[int64](3600)
		}
	}
	if err := f.c.Status().Patch(f.ctx, fresh, client.MergeFrom(before)); err != nil {
		f.t.Fatal(err)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var _ = time.Second

// waitEvent waits for an Event of the given reason on the named DatabaseCluster whose note
// contains every part.
func (f *fixture) waitEvent(name, reason string, parts ...string) {
	f.t.Helper()
	var seen []string
	err := framework.WaitFor(f.ctx, framework.DefaultTimeout, reason+" Event", func(ctx context.Context) (bool, error) {
		events := &eventsv1.EventList{}
		if err := f.c.List(ctx, events, client.InNamespace(f.ns)); err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, e := range events.Items {
			if e.Regarding.Name == name && e.Reason == reason && containsAll(e.Note, parts...) {
				return true, nil
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return false, nil
	})
	if err != nil {
		f.t.Fatalf("%v; Events seen:\n%s", err, strings.Join(seen, "\n"))
	}
}

// clusterPrefix is a short stand-in for a test's name in the names of its MemberClusters, which
// are cluster-scoped and so shared by every test of the run: the name's first 14 characters and a
// hash of the whole (two tests whose names begin alike had the same clusters).
func clusterPrefix(suite string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(suite))
	return fmt.Sprintf("%s-%05x", strings.Trim(suite[:min(len(suite), 14)], "-"), h.Sum32()&0xfffff)
}

// primary is d's status.primary, empty while the hub has not written one (a wait's condition
// may see the DatabaseCluster before its first status).
func primary(d *dbfleetv1alpha1.DatabaseCluster) dbfleetv1alpha1.PrimaryStatus {
	if d.Status.Primary == nil {
		return dbfleetv1alpha1.PrimaryStatus{}
	}
	return *d.Status.Primary
}
