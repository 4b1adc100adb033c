package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/test/framework"
)

// results are the measured passes and what the hub did meanwhile.
type results struct {
	passes             []passResult
	machine, loadAfter string
}

type passResult struct {
	name      string
	n         int
	dbs       []string
	created   []time.Time
	steps     [nSteps][]time.Duration // see stepNames
	reconcile float64                 // the hub's databasecluster reconciles during the pass
	dbcWrites float64                 // PATCH databaseclusters/status, as the hub API server counts them
	mdbWrites float64                 // PATCH memberdatabases/status (the agents' reports)
	elapsed   time.Duration
}

// nSteps are the figures measured of each database.
const nSteps = 5

var stepNames = [nSteps]string{
	"apply → StatefulSet in every placed member",
	"apply → every Pod Ready",
	"apply → hub reports Available",
	"every Pod Ready → hub reports Available",
	"apply → every MemberDatabase on the hub",
}

// measure runs the passes on the federation in d: each pass creates its databases, waits until
// every one is through every step, and deletes them again.
func measure(ctx context.Context, d layout.Dir, o options) (*results, error) {
	st, err := d.Load()
	if err != nil {
		return nil, err
	}
	hubCfg, err := clientcmd.BuildConfigFromFlags("", d.Kubeconfig(layout.HubCluster))
	if err != nil {
		return nil, err
	}
	hubCfg.QPS, hubCfg.Burst = 200, 400
	hub, err := client.New(hubCfg, client.Options{Scheme: framework.Scheme})
	if err != nil {
		return nil, err
	}
	members := st.MemberNames()
	rec := newRecorder()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// Watches first, so no event of the databases is missed.
	if err := watch(ctx, d, hubCfg, members, rec); err != nil {
		return nil, err
	}

	if err := setUp(ctx, hub, members); err != nil {
		return nil, err
	}
	metrics, err := discovery.NewDiscoveryClientForConfig(hubCfg)
	if err != nil {
		return nil, err
	}
	res := &results{}
	for _, ps := range passes(o) {
		if ps.n == 0 {
			continue
		}
		p, err := runPass(ctx, hub, metrics, st.HubMetrics, rec, ps, o)
		if err != nil {
			return res, err
		}
		res.passes = append(res.passes, p)
		logf("%s: done in %.1fs", ps.name, p.elapsed.Seconds())
		p.printSteps(os.Stdout)
		// A member's Service range (/24) holds about 125 databases' client Services: the next
		// pass starts on a fleet without these.
		start := time.Now()
		if err := deleteAll(ctx, hub, p.dbs, o.waitBurst); err != nil {
			return res, err
		}
		logf("%s: deleted, every member confirmed, in %.1fs", ps.name, time.Since(start).Seconds())
	}
	return res, nil
}

// watch starts caches of the hub (DatabaseClusters, MemberDatabases) and of every member
// (StatefulSets, Pods) that tell rec what they see, and waits until they are synced; they stop
// with ctx.
func watch(ctx context.Context, d layout.Dir, hubCfg *rest.Config, members []string, rec *recorder) error {
	hubNamespaces := map[string]cache.Config{namespace: {}}
	for _, m := range members {
		hubNamespaces[dbfleetv1alpha1.MemberNamespace(m)] = cache.Config{}
	}
	hubCache, err := cache.New(hubCfg, cache.Options{Scheme: framework.Scheme, DefaultNamespaces: hubNamespaces})
	if err != nil {
		return err
	}
	if err := onEvents(ctx, hubCache, &dbfleetv1alpha1.DatabaseCluster{}, func(obj client.Object) {
		rec.database(obj.(*dbfleetv1alpha1.DatabaseCluster))
	}); err != nil {
		return err
	}
	if err := onEvents(ctx, hubCache, &dbfleetv1alpha1.MemberDatabase{}, func(obj client.Object) {
		rec.memberDatabase(obj.(*dbfleetv1alpha1.MemberDatabase))
	}); err != nil {
		return err
	}
	caches := []cache.Cache{hubCache}
	for _, m := range members {
		cfg, err := clientcmd.BuildConfigFromFlags("", d.Kubeconfig(m))
		if err != nil {
			return err
		}
		c, err := cache.New(cfg, cache.Options{Scheme: framework.Scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
		if err != nil {
			return err
		}
		if err := onEvents(ctx, c, &appsv1.StatefulSet{}, func(obj client.Object) { rec.statefulSet(m, obj.(*appsv1.StatefulSet)) }); err != nil {
			return err
		}
		if err := onEvents(ctx, c, &corev1.Pod{}, func(obj client.Object) { rec.pod(m, obj.(*corev1.Pod)) }); err != nil {
			return err
		}
		caches = append(caches, c)
	}
	for _, c := range caches {
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("caches did not sync")
		}
	}
	return nil
}

// pass is one round of the benchmark: n databases named prefix-NNN, created back to back when
// burst, else each once the previous one is through every step.
type pass struct {
	name   string
	n      int
	prefix string
	burst  bool
}

func passes(o options) []pass {
	return []pass{
		{fmt.Sprintf("%d one at a time", o.one), o.one, "one", false},
		{fmt.Sprintf("burst of %d", o.burst), o.burst, "burst", true},
	}
}

// runPass creates the databases of ps, waits until every one is through every step, and returns
// their figures and what the hub did meanwhile.
func runPass(ctx context.Context, hub client.Client, metrics *discovery.DiscoveryClient, hubMetricsAddr string,
	rec *recorder, ps pass, o options) (passResult, error) {
	before, err := readMetrics(ctx, metrics, hubMetricsAddr)
	if err != nil {
		return passResult{}, err
	}
	start := time.Now()
	names := make([]string, ps.n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%03d", ps.prefix, i)
	}
	for i, name := range names {
		rec.created(name, time.Now())
		if err := hub.Create(ctx, newDatabase(name, o.replicas)); err != nil {
			return passResult{}, fmt.Errorf("create %s: %w", name, err)
		}
		if !ps.burst {
			if err := rec.await(ctx, o.waitOne, names[i:i+1]); err != nil {
				return passResult{}, err
			}
		}
	}
	if err := rec.await(ctx, o.waitBurst, names); err != nil {
		return passResult{}, err
	}
	after, err := readMetrics(ctx, metrics, hubMetricsAddr)
	if err != nil {
		return passResult{}, err
	}
	p := passResult{name: ps.name, n: ps.n, elapsed: time.Since(start),
		reconcile: after.reconciles - before.reconciles,
		dbcWrites: after.dbcStatusWrites - before.dbcStatusWrites,
		mdbWrites: after.mdbStatusWrites - before.mdbStatusWrites}
	for _, name := range names {
		p.dbs = append(p.dbs, name)
		p.created = append(p.created, rec.createdTime(name))
		for i, v := range rec.steps(name) {
			p.steps[i] = append(p.steps[i], v)
		}
	}
	return p, nil
}

// onEvents calls f with the object of every add and update event of obj's kind.
func onEvents(ctx context.Context, c cache.Cache, obj client.Object, f func(client.Object)) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { f(o.(client.Object)) },
		UpdateFunc: func(_, o any) { f(o.(client.Object)) },
	})
	return err
}

// setUp creates the namespace and a PropagationPolicy dividing every database there evenly over
// the members by static weights.
func setUp(ctx context.Context, hub client.Client, members []string) error {
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	var weights []policyv1alpha1.StaticClusterWeight
	for _, m := range members {
		weights = append(weights, policyv1alpha1.StaticClusterWeight{
			TargetCluster: policyv1alpha1.ClusterAffinity{ClusterNames: []string{m}}, Weight: 1})
	}
	pp := &dbfleetv1alpha1.PropagationPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "evenly"},
		Spec: dbfleetv1alpha1.PropagationSpec{
			ResourceSelectors: []dbfleetv1alpha1.ResourceSelector{{}},
			Placement: policyv1alpha1.Placement{
				ReplicaScheduling: &policyv1alpha1.ReplicaSchedulingStrategy{
					ReplicaSchedulingType:     policyv1alpha1.ReplicaSchedulingTypeDivided,
					ReplicaDivisionPreference: policyv1alpha1.ReplicaDivisionPreferenceWeighted,
					WeightPreference:          &policyv1alpha1.ClusterPreferences{StaticWeightList: weights},
				},
			},
		},
	}
	if err := hub.Create(ctx, pp); err != nil {
		return fmt.Errorf("create PropagationPolicy: %w", err)
	}
	return nil
}

// newDatabase is a PostgreSQL 15 requesting no resources, so capacity never limits placement.
func newDatabase(name string, replicas int32) *dbfleetv1alpha1.DatabaseCluster {
	return &dbfleetv1alpha1.DatabaseCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: dbfleetv1alpha1.DatabaseClusterSpec{
			DatabaseTemplate: dbfleetv1alpha1.DatabaseTemplate{
				Engine: dbfleetv1alpha1.EnginePostgres, Version: "15",
				Storage: dbfleetv1alpha1.StorageSpec{Size: resource.MustParse("1Gi")},
			},
			Replicas: replicas,
		},
	}
}

// deleteAll deletes the databases and waits until the hub has let every one go, which it does
// once every member's agent has removed its share.
func deleteAll(ctx context.Context, hub client.Client, names []string, timeout time.Duration) error {
	for _, name := range names {
		dbc := &dbfleetv1alpha1.DatabaseCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		if err := hub.Delete(ctx, dbc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %s: %w", name, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		list := &dbfleetv1alpha1.DatabaseClusterList{}
		if err := hub.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d databases not deleted after %s", len(list.Items), timeout)
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
