package install

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// createDatabase creates a policy dividing replicas evenly between the members and a 2-replica
// PostgreSQL 15 whose primary prefers the first member.
func createDatabase(t *testing.T, hub client.Client) *dbfleetv1alpha1.DatabaseCluster {
	t.Helper()
	ctx := context.Background()
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dbNamespace}}); err != nil {
		t.Fatal(err)
	}
	var weights []policyv1alpha1.StaticClusterWeight
	for _, m := range members {
		weights = append(weights, policyv1alpha1.StaticClusterWeight{TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m.Name}}, Weight: 1})
	}
	pp := &dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbNamespace, Name: "placement"},
		Spec: dbfleetv1alpha1.PropagationSpec{
			ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{}},
			Placement: policyv1alpha1.Placement{ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
				ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
				ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
				WeightPreference:          &policyv1alpha1.ClusterPreferences{StaticWeightList: weights},
			}},
		},
	}
	if err := hub.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	dbc := &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbNamespace, Name: dbName},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{
				Engine: dbfleetv1alpha1.EnginePostgres, Version: "15", // postgres:15, imported into the members' nodes
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
			},
			Replicas: int32(len(members)),
			Primary:  &dbfleetv1alpha1.PrimarySpec{PreferredClusters: []string{members[0].Name}},
		},
	}
	if err := hub.Create(ctx, dbc); err != nil {
		t.Fatal(err)
	}
	return dbc
}

// state is what must not change while the hub fails over or is upgraded.
type state struct {
	primary dbfleetv1alpha1.PrimaryStatus
	// shares are the MemberDatabases by cluster: their generation and epoch (the hub wrote
	// nothing new to them).
	shares map[string]share
	// statefulSets are the members' StatefulSets' generations by cluster/name (no agent
	// changed them).
	statefulSets map[string]int64
	// primaries are the instances reporting role primary, as cluster/pod.
	primaries []string
}

type share struct{ Generation, Epoch int64 }

func observeState(ctx context.Context, hub client.Client, clusters map[string]client.Client) (state, error) {
	s := state{shares: map[string]share{}, statefulSets: map[string]int64{}}
	d := &dbfleetv1alpha1.DatabaseCluster{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: dbNamespace, Name: dbName}, d); err != nil {
		return s, err
	}
	if d.Status.Primary != nil {
		s.primary = *d.Status.Primary
	}
	for _, m := range members {
		mdb := &dbfleetv1alpha1.MemberDatabase{}
		key := client.ObjectKey{Namespace: dbfleetv1alpha1.MemberNamespace(m.Name), Name: dbfleetv1alpha1.MemberDatabaseName(dbNamespace, dbName)}
		if err := hub.Get(ctx, key, mdb); client.IgnoreNotFound(err) != nil {
			return s, err
		} else if err == nil {
			s.shares[m.Name] = share{Generation: mdb.Generation, Epoch: mdb.Spec.Epoch}
			for _, in := range mdb.Status.Instances {
				if in.Role == dbfleetv1alpha1.InstanceRunningPrimary {
					s.primaries = append(s.primaries, m.Name+"/"+in.Pod)
				}
			}
		}
		list := &appsv1.StatefulSetList{}
		if err := clusters[m.Name].List(ctx, list); err != nil {
			return s, err
		}
		for _, sts := range list.Items {
			s.statefulSets[m.Name+"/"+sts.Namespace+"/"+sts.Name] = sts.Generation
		}
	}
	slices.Sort(s.primaries)
	return s, nil
}

func observe(t *testing.T, hub client.Client, clusters map[string]client.Client) state {
	t.Helper()
	s, err := observeState(context.Background(), hub, clusters)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.primaries) != 1 {
		t.Fatalf("primary instances %v, want exactly one", s.primaries)
	}
	return s
}

// differences lists how got differs from base.
func differences(base, got state) []string {
	var out []string
	if p, b := got.primary, base.primary; p.Cluster != b.Cluster || p.Pod != b.Pod || p.Epoch != b.Epoch || !p.Since.Equal(b.Since) {
		out = append(out, fmt.Sprintf("status.primary %+v, was %+v", got.primary, base.primary))
	}
	for c, sh := range base.shares {
		if got.shares[c] != sh {
			out = append(out, fmt.Sprintf("MemberDatabase of %s: generation/epoch %+v, was %+v", c, got.shares[c], sh))
		}
	}
	for c := range got.shares {
		if _, ok := base.shares[c]; !ok {
			out = append(out, "a new MemberDatabase in "+c)
		}
	}
	for k, g := range base.statefulSets {
		if got.statefulSets[k] != g {
			out = append(out, fmt.Sprintf("StatefulSet %s: generation %d, was %d", k, got.statefulSets[k], g))
		}
	}
	if len(got.primaries) > 1 {
		out = append(out, fmt.Sprintf("%d primaries: %v", len(got.primaries), got.primaries))
	}
	return out
}

func requireSame(t *testing.T, base, got state) {
	t.Helper()
	if d := differences(base, got); len(d) > 0 {
		t.Fatalf("the database changed: %s", strings.Join(d, "; "))
	}
	if !slices.Equal(got.primaries, base.primaries) {
		t.Fatalf("primary instances %v, were %v", got.primaries, base.primaries)
	}
	t.Logf("unchanged: primary %s/%s at epoch %d, MemberDatabases %v, StatefulSets %v, primary instance %v",
		got.primary.Cluster, got.primary.Pod, got.primary.Epoch, got.shares, got.statefulSets, got.primaries)
}

// monitor looks at the database every 200 ms while the hub changes hands, and keeps every
// difference from the baseline it sees (a change undone before the end would escape a look at
// the end only).
type monitor struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	seen   []string
	looks  int
}

func watchDatabase(t *testing.T, hub client.Client, clusters map[string]client.Client, base state) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &monitor{cancel: cancel}
	m.wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if s, err := observeState(ctx, hub, clusters); err == nil {
				m.mu.Lock()
				m.looks++
				for _, d := range differences(base, s) {
					if !slices.Contains(m.seen, d) {
						m.seen = append(m.seen, d)
					}
				}
				m.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	t.Cleanup(m.cancel)
	return m
}

func (m *monitor) stop(t *testing.T) {
	t.Helper()
	m.cancel()
	m.wg.Wait()
	if len(m.seen) > 0 {
		t.Fatalf("in %d looks at the database, seen: %s", m.looks, strings.Join(m.seen, "; "))
	}
	t.Logf("%d looks at the database while the hub changed hands: nothing changed", m.looks)
}
