// Command benchlatency measures how long one database takes from apply to running on a local
// federation with fake nodes (make bench-latency): it brings up `localfed up --nodes kwok` in a
// state directory of its own, creates DatabaseClusters one at a time and then in a burst, and
// prints, for each pass, p50, p99 and max of apply → every StatefulSet created in each member,
// apply → every Pod Ready, apply → the hub reporting Available, and every Pod Ready → Available.
// kwok reports a scheduled Pod Ready at once, so what is measured is the control planes' path:
// the hub placing and propagating, the agents applying and reporting, the member's StatefulSet
// controller and scheduler. It tears the federation down with `localfed down`, which checks
// that nothing is left. See docs/performance.md.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/hack/localfed/layout"
	"github.com/dbfleet/dbfleet/test/framework"
)

// podsPerNode is what a kwok Node of localfed takes.
const podsPerNode = 100 // of its 110, leaving room for anything else scheduled there

// namespace is where the benchmark's databases live, on the hub and in every member.
const namespace = "bench-latency"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-latency:", err)
		os.Exit(1)
	}
}

type options struct {
	bin, dir     string
	one, burst   int
	replicas     int32
	keep         bool
	waitOne      time.Duration
	waitBurst    time.Duration
	localfedArgs []string
	samples      string
}

func run() error {
	var o options
	var upFlags string
	flag.StringVar(&o.bin, "bin", "bin", "directory of hub, agent and localfed; the Kubernetes binaries are in its k8s/")
	flag.StringVar(&o.dir, "dir", "_output/bench-latency/fed", "the federation's state directory (brought up and down by this command)")
	flag.IntVar(&o.one, "one", 100, "databases created one at a time, each once the previous one is Available")
	flag.IntVar(&o.burst, "burst", 100, "databases then created back to back")
	replicas := flag.Int("replicas", 3, "replicas of each database, divided evenly over the members")
	flag.BoolVar(&o.keep, "keep", false, "leave the federation running (stop it with `bin/localfed down --dir DIR`)")
	flag.DurationVar(&o.waitOne, "wait-one", 2*time.Minute, "how long one database of the first pass may take")
	flag.DurationVar(&o.waitBurst, "wait-burst", 10*time.Minute, "how long the burst may take")
	flag.StringVar(&upFlags, "up-flags", "", "extra flags for `localfed up`, space-separated")
	flag.StringVar(&o.samples, "samples", "_output/bench-latency/samples.csv", "where to write every database's figures (CSV; empty: nowhere)")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	o.replicas = int32(*replicas)
	o.localfedArgs = strings.Fields(upFlags)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	localfed := filepath.Join(o.bin, "localfed")
	// A kwok Node takes 110 pods; the first pass's databases are deleted before the burst, but
	// their claims stay (the StatefulSets' retention policy), so each pass needs volumes.
	members := 3
	perMember := (o.one + o.burst) * ((int(o.replicas) + members - 1) / members)
	nodes := min(max((max(o.one, o.burst)*((int(o.replicas)+members-1)/members)+podsPerNode-1)/podsPerNode, 1), 9)
	up := append([]string{"up", "--dir", dir, "--bin", o.bin, "--nodes", "kwok",
		"--nodes-per-member", strconv.Itoa(nodes), "--volumes", strconv.Itoa(perMember + 10)}, o.localfedArgs...)
	machine := describeMachine()
	logf("machine: %s", machine)
	logf("%s %s", localfed, strings.Join(up, " "))
	if err := command(ctx, localfed, up...); err != nil {
		return errors.Join(fmt.Errorf("localfed up: %w", err), teardown(localfed, dir, o.keep))
	}
	res, runErr := measure(ctx, layout.Dir(dir), o)
	downErr := teardown(localfed, dir, o.keep)
	if res != nil {
		res.machine, res.loadAfter = machine, loadAverage()
		res.print(o)
		if o.samples != "" {
			if err := res.writeSamples(o.samples); err != nil {
				runErr = errors.Join(runErr, err)
			}
		}
	}
	return errors.Join(runErr, downErr)
}

func teardown(localfed, dir string, keep bool) error {
	if keep {
		logf("federation kept: stop it with %s down --dir %s", localfed, dir)
		return nil
	}
	if err := command(context.Background(), localfed, "down", "--dir", dir); err != nil {
		return fmt.Errorf("localfed down: %w", err)
	}
	return nil
}

func command(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func logf(format string, args ...any) {
	fmt.Printf("[bench-latency %s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

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
	hubNamespaces := map[string]cache.Config{namespace: {}}
	for _, m := range members {
		hubNamespaces[dbfleetv1alpha1.MemberNamespace(m)] = cache.Config{}
	}
	hubCache, err := cache.New(hubCfg, cache.Options{Scheme: framework.Scheme, DefaultNamespaces: hubNamespaces})
	if err != nil {
		return nil, err
	}
	if err := onEvents(ctx, hubCache, &dbfleetv1alpha1.DatabaseCluster{}, func(obj client.Object) {
		rec.database(obj.(*dbfleetv1alpha1.DatabaseCluster))
	}); err != nil {
		return nil, err
	}
	if err := onEvents(ctx, hubCache, &dbfleetv1alpha1.MemberDatabase{}, func(obj client.Object) {
		rec.memberDatabase(obj.(*dbfleetv1alpha1.MemberDatabase))
	}); err != nil {
		return nil, err
	}
	caches := []cache.Cache{hubCache}
	for _, m := range members {
		cfg, err := clientcmd.BuildConfigFromFlags("", d.Kubeconfig(m))
		if err != nil {
			return nil, err
		}
		c, err := cache.New(cfg, cache.Options{Scheme: framework.Scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
		if err != nil {
			return nil, err
		}
		if err := onEvents(ctx, c, &appsv1.StatefulSet{}, func(obj client.Object) { rec.statefulSet(m, obj.(*appsv1.StatefulSet)) }); err != nil {
			return nil, err
		}
		if err := onEvents(ctx, c, &corev1.Pod{}, func(obj client.Object) { rec.pod(m, obj.(*corev1.Pod)) }); err != nil {
			return nil, err
		}
		caches = append(caches, c)
	}
	for _, c := range caches {
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			return nil, errors.New("caches did not sync")
		}
	}

	if err := setUp(ctx, hub, members); err != nil {
		return nil, err
	}
	metrics, err := discovery.NewDiscoveryClientForConfig(hubCfg)
	if err != nil {
		return nil, err
	}
	res := &results{}
	for _, pass := range []struct {
		name   string
		n      int
		prefix string
		burst  bool
	}{{fmt.Sprintf("%d one at a time", o.one), o.one, "one", false}, {fmt.Sprintf("burst of %d", o.burst), o.burst, "burst", true}} {
		if pass.n == 0 {
			continue
		}
		before, err := readMetrics(ctx, metrics, st.HubMetrics)
		if err != nil {
			return res, err
		}
		start := time.Now()
		names := make([]string, pass.n)
		for i := range names {
			names[i] = fmt.Sprintf("%s-%03d", pass.prefix, i)
		}
		for i, name := range names {
			rec.created(name, time.Now())
			if err := hub.Create(ctx, newDatabase(name, o.replicas)); err != nil {
				return res, fmt.Errorf("create %s: %w", name, err)
			}
			if !pass.burst {
				if err := rec.await(ctx, o.waitOne, names[i:i+1]); err != nil {
					return res, err
				}
			}
		}
		if err := rec.await(ctx, o.waitBurst, names); err != nil {
			return res, err
		}
		after, err := readMetrics(ctx, metrics, st.HubMetrics)
		if err != nil {
			return res, err
		}
		p := passResult{name: pass.name, n: pass.n, elapsed: time.Since(start),
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
		res.passes = append(res.passes, p)
		logf("%s: done in %.1fs", pass.name, p.elapsed.Seconds())
		p.printSteps(os.Stdout)
		// A member's Service range (/24) holds about 125 databases' client Services: the next
		// pass starts on a fleet without these.
		start = time.Now()
		if err := deleteAll(ctx, hub, names, o.waitBurst); err != nil {
			return res, err
		}
		logf("%s: deleted, every member confirmed, in %.1fs", pass.name, time.Since(start).Seconds())
	}
	return res, nil
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

// nearestRank is the p-th percentile of sorted (nearest rank).
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (p passResult) printSteps(w *os.File) {
	for i, name := range stepNames {
		v := slices.Clone(p.steps[i])
		slices.Sort(v)
		fmt.Fprintf(w, "LATENCY %-18q %-44s p50 %6.3fs  p99 %6.3fs  max %6.3fs  (n=%d)\n", p.name, name,
			nearestRank(v, 50).Seconds(), nearestRank(v, 99).Seconds(), v[len(v)-1].Seconds(), len(v))
	}
	fmt.Fprintf(w, "HUB     %-18q %.0f databasecluster reconciles (%.2f per database), %.0f DatabaseCluster status writes (%.2f), %.0f MemberDatabase status writes (%.2f)\n",
		p.name, p.reconcile, p.reconcile/float64(p.n), p.dbcWrites, p.dbcWrites/float64(p.n), p.mdbWrites, p.mdbWrites/float64(p.n))
}

func (res *results) print(o options) {
	fmt.Println()
	fmt.Printf("Command: `make bench-latency`  # bin/benchlatency %s\n\n", strings.Join(os.Args[1:], " "))
	fmt.Printf("Machine: %s; load average after: %s\n\n", res.machine, res.loadAfter)
	fmt.Printf("Each database: postgres, %d replicas divided evenly over the members by static weights.\n\n", o.replicas)
	fmt.Println("| pass | step | p50 | p99 | max |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, p := range res.passes {
		for i, name := range stepNames {
			v := slices.Clone(p.steps[i])
			slices.Sort(v)
			fmt.Printf("| %s | %s | %.2f s | %.2f s | %.2f s |\n", p.name, name,
				nearestRank(v, 50).Seconds(), nearestRank(v, 99).Seconds(), v[len(v)-1].Seconds())
		}
	}
	fmt.Println()
	fmt.Println("| pass | databasecluster reconciles | DatabaseCluster status writes | MemberDatabase status writes |")
	fmt.Println("|---|---:|---:|---:|")
	for _, p := range res.passes {
		fmt.Printf("| %s | %.0f (%.2f per database) | %.0f (%.2f) | %.0f (%.2f) |\n", p.name,
			p.reconcile, p.reconcile/float64(p.n), p.dbcWrites, p.dbcWrites/float64(p.n), p.mdbWrites, p.mdbWrites/float64(p.n))
	}
}

// hubMetrics are counters read from the hub's metrics endpoint and the hub API server's.
type hubMetrics struct {
	reconciles, dbcStatusWrites, mdbStatusWrites float64
}

func readMetrics(ctx context.Context, apiserver *discovery.DiscoveryClient, hubMetricsAddr string) (hubMetrics, error) {
	var m hubMetrics
	raw, err := apiserver.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return m, fmt.Errorf("read the hub API server's metrics: %w", err)
	}
	scan(string(raw), func(series string, v float64) {
		if !strings.HasPrefix(series, "apiserver_request_total{") || !strings.Contains(series, `verb="PATCH"`) ||
			!strings.Contains(series, `subresource="status"`) {
			return
		}
		switch {
		case strings.Contains(series, `resource="databaseclusters"`):
			m.dbcStatusWrites += v
		case strings.Contains(series, `resource="memberdatabases"`):
			m.mdbStatusWrites += v
		}
	})
	hubRaw, err := httpGet(ctx, "http://"+hubMetricsAddr+"/metrics")
	if err != nil {
		return m, fmt.Errorf("read the hub's metrics: %w", err)
	}
	scan(hubRaw, func(series string, v float64) {
		if strings.HasPrefix(series, "controller_runtime_reconcile_total{") && strings.Contains(series, `controller="databasecluster"`) {
			m.reconciles += v
		}
	})
	return m, nil
}

func scan(text string, f func(series string, v float64)) {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		f(line[:i], v)
	}
}

func describeMachine() string {
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), %s %s/%s, %s UTC, load average %s", runtime.NumCPU(), cpu,
		runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Now().UTC().Format("2006-01-02 15:04"), loadAverage())
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func httpGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), nil
}

// writeSamples writes one line per database: its pass, name, create time and the four figures in
// seconds, in the order they were created.
func (res *results) writeSamples(path string) error {
	var b strings.Builder
	b.WriteString("pass,database,created,statefulsets_s,pods_ready_s,available_s,pods_ready_to_available_s,memberdatabases_s\n")
	for _, p := range res.passes {
		for i, db := range p.dbs {
			fmt.Fprintf(&b, "%s,%s,%s", p.name, db, p.created[i].UTC().Format(time.RFC3339Nano))
			for s := range p.steps {
				fmt.Fprintf(&b, ",%.3f", p.steps[s][i].Seconds())
			}
			b.WriteString("\n")
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write samples: %w", err)
	}
	logf("every database's figures: %s", path)
	return nil
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
