package scale

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// check verifies that every database is Available and that its MemberDatabases are exactly its
// placements, each applied in its member.
func (b *bench) check(ctx context.Context) error {
	dbs, err := b.obs.list(ctx)
	if err != nil {
		return err
	}
	want := map[types.NamespacedName]map[string]bool{}
	k := &b.report.Correctness
	k.Checked = true
	for i := range dbs {
		d := &dbs[i]
		if meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) {
			k.Available++
		}
		clusters := map[string]bool{}
		for _, p := range d.Status.Placements {
			if p.Replicas > 0 {
				clusters[p.Cluster] = true
			}
		}
		want[types.NamespacedName{Namespace: d.Namespace, Name: d.Name}] = clusters
	}
	got := map[types.NamespacedName]map[string]int{}
	list := &dbfleetv1alpha1.MemberDatabaseList{}
	for cont := ""; ; {
		if err := b.admin.List(ctx, list, client.Limit(2000), client.Continue(cont)); err != nil {
			return fmt.Errorf("list MemberDatabases: %w", err)
		}
		for i := range list.Items {
			m := &list.Items[i]
			k.MemberDatabases++
			ref := types.NamespacedName{Namespace: m.Spec.DatabaseRef.Namespace, Name: m.Spec.DatabaseRef.Name}
			cluster := m.Labels[dbfleetv1alpha1.LabelCluster]
			if got[ref] == nil {
				got[ref] = map[string]int{}
			}
			got[ref][cluster]++
			if a := b.agents.get(cluster); a == nil ||
				a.member.Store.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &appsv1.StatefulSet{}) != nil {
				k.MissingInMembers++
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	for ref, clusters := range want {
		for c := range clusters {
			if got[ref][c] == 0 {
				k.Lost++
			}
		}
	}
	for ref, clusters := range got {
		for c, n := range clusters {
			if n > 1 || !want[ref][c] {
				k.Duplicate += n - boolInt(want[ref][c])
			}
		}
	}
	b.report.Create.MemberDBs = k.MemberDatabases
	b.progress("check: %d/%d Available, %d MemberDatabases, lost %d, duplicate %d, StatefulSets missing in members %d",
		k.Available, b.cfg.Databases, k.MemberDatabases, k.Lost, k.Duplicate, k.MissingInMembers)
	return nil
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// steady watches the untouched fleet for cfg.Steady.
func (b *bench) steady(ctx context.Context) error {
	b.progress("steady state: settling 15 s, then measuring for %s", b.cfg.Steady)
	if err := sleep(ctx, 15*time.Second); err != nil {
		return err
	}
	m0, err := b.metricsGet(ctx)
	if err != nil {
		return err
	}
	cpu0 := b.cpuSnapshot()
	stopProfile := b.profileHarness("harness-steady-cpu.pprof")
	start := time.Now()
	for time.Since(start) < b.cfg.Steady {
		if err := sleep(ctx, min(30*time.Second, b.cfg.Steady-time.Since(start))); err != nil {
			return err
		}
		b.progress("steady state: %s of %s", time.Since(start).Round(time.Second), b.cfg.Steady)
	}
	stopProfile()
	m1, err := b.metricsGet(ctx)
	if err != nil {
		return err
	}
	cpu1 := b.cpuSnapshot()
	d := time.Since(start)
	rs := rates(m0.requests(), m1.requests(), d)
	perSec := total(rs) / d.Seconds()
	var dcStatus int64
	for _, r := range rs {
		if isWrite(r.Verb) && r.Resource == "databaseclusters/status" {
			dcStatus += r.Count
		}
	}
	s := &SteadyFigures{
		Seconds: round(d.Seconds()), RequestsPerSecond: round(perSec),
		PerCluster: round3(perSec / float64(b.cfg.Clusters)), PerDatabase: round4(perSec / float64(b.cfg.Databases)),
		Requests:                      rs,
		StatusWritesPerDBPerMinute:    round4(float64(dcStatus) / float64(b.cfg.Databases) / d.Minutes()),
		MemberDatabaseWritesPerMinute: round(float64(writesTo(rs, "memberdatabases")) / d.Minutes()),
	}
	b.steadyMCWrites = float64(writesTo(rs, "memberclusters")) / d.Seconds()
	b.report.Steady = s
	for i := range b.report.Resources {
		_, b.report.Resources[i].SteadyCores = cores(cpu0, cpu1, b.report.Resources[i].Process)
	}
	b.progress("steady state: %.0f requests/s (%.3f per cluster), DatabaseCluster status writes %.4f per database per minute",
		s.RequestsPerSecond, s.PerCluster, s.StatusWritesPerDBPerMinute)
	return nil
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
func round4(x float64) float64 { return float64(int64(x*10000+0.5)) / 10000 }

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// restartHub stops `hub run` and starts it again on the steady fleet, and counts the writes
// that follow.
func (b *bench) restartHub(ctx context.Context) error {
	b.progress("hub restart: stopping hub run")
	m0, err := b.metricsGet(ctx)
	if err != nil {
		return err
	}
	agents0 := agentCounts()
	b.stopHub(30 * time.Second)
	start := time.Now()
	if err := b.runHub(ctx, "hub-restarted.log"); err != nil {
		return err
	}
	var reconciles float64
	resyncTimeout := 5*time.Minute + time.Duration(b.cfg.Databases)*50*time.Millisecond
	err = waitFor(ctx, resyncTimeout, "the restarted hub to reconcile every DatabaseCluster", func() (bool, error) {
		m, err := httpMetrics(ctx, b.hubMetricsURL)
		if err != nil {
			return false, nil
		}
		reconciles = m.sum("controller_runtime_reconcile_total", map[string]string{"controller": "databasecluster"})
		depth := m.sum("workqueue_depth", map[string]string{"name": "databasecluster"})
		return reconciles >= float64(b.cfg.Databases) && depth == 0, nil
	})
	if err != nil {
		// Report the writes of the window anyway: they say why it did not settle.
		if m1, merr := b.metricsGet(context.WithoutCancel(ctx)); merr == nil {
			window := time.Since(start)
			rs := rates(m0.requests(), m1.requests(), window)
			b.report.Restart = &RestartFigures{ResyncSeconds: -1, WindowSeconds: round(window.Seconds()),
				DatabaseClusterWrites: writesTo(rs, "databaseclusters"), MemberDatabaseWrites: writesTo(rs, "memberdatabases"),
				MemberClusterWrites: writesTo(rs, "memberclusters"), MemberClusterBaseline: round(b.steadyMCWrites * window.Seconds()),
				ReconcilesAfterRestart: int64(reconciles), Agents: agentCounts().since(agents0)}
			for _, q := range rs {
				if isWrite(q.Verb) {
					b.report.Restart.Writes = append(b.report.Restart.Writes, q)
				}
			}
		}
		return err
	}
	resync := time.Since(start)
	b.progress("hub restart: resynced in %.1f s; counting writes for 10 s more", resync.Seconds())
	if err := sleep(ctx, 10*time.Second); err != nil {
		return err
	}
	m1, err := b.metricsGet(ctx)
	if err != nil {
		return err
	}
	window := time.Since(start)
	rs := rates(m0.requests(), m1.requests(), window)
	b.report.Restart = &RestartFigures{
		ResyncSeconds: round(resync.Seconds()), WindowSeconds: round(window.Seconds()),
		DatabaseClusterWrites: writesTo(rs, "databaseclusters"), MemberDatabaseWrites: writesTo(rs, "memberdatabases"),
		MemberClusterWrites: writesTo(rs, "memberclusters"), MemberClusterBaseline: round(b.steadyMCWrites * window.Seconds()),
		ReconcilesAfterRestart: int64(reconciles), Agents: agentCounts().since(agents0),
	}
	for _, q := range rs {
		if isWrite(q.Verb) {
			b.report.Restart.Writes = append(b.report.Restart.Writes, q)
		}
	}
	r := b.report.Restart
	b.progress("hub restart: writes DatabaseClusters %d, MemberDatabases %d, MemberClusters %d (steady state alone: %.0f); agents: %s",
		r.DatabaseClusterWrites, r.MemberDatabaseWrites, r.MemberClusterWrites, r.MemberClusterBaseline, r.Agents.text())
	return nil
}

// failovers cuts one cluster off the hub, heals it, then cuts FailoverFraction of the clusters.
func (b *bench) failovers(ctx context.Context) error {
	one := []string{clusterName(3 % b.cfg.Clusters)}
	if err := b.failover(ctx, one); err != nil {
		return err
	}
	if err := b.heal(ctx, one); err != nil {
		return err
	}
	k := max(1, int(b.cfg.FailoverFraction*float64(b.cfg.Clusters)))
	var many []string
	for j := range k {
		many = append(many, clusterName((j*b.cfg.Clusters/k+5)%b.cfg.Clusters))
	}
	return b.failover(ctx, many)
}

// failover cuts the clusters' agents off the hub (every new hub request fails, as in a network
// partition) and times until every database that had a share there is re-placed and Available,
// sampling for two live primaries of one database meanwhile.
func (b *bench) failover(ctx context.Context, names []string) error {
	cut := map[string]bool{}
	for _, n := range names {
		cut[n] = true
	}
	dbs, err := b.obs.list(ctx)
	if err != nil {
		return err
	}
	pending := map[types.NamespacedName]bool{}
	for i := range dbs {
		for _, p := range dbs[i].Status.Placements {
			if cut[p.Cluster] && p.Replicas > 0 {
				pending[types.NamespacedName{Namespace: dbs[i].Namespace, Name: dbs[i].Name}] = true
			}
		}
	}
	run := FailoverRun{Clusters: len(names), AffectedDatabases: len(pending),
		TargetSeconds: (b.cfg.GracePeriod + unreachableToleration + 5*time.Second).Seconds()}
	b.progress("failover: cutting %d cluster(s) off the hub (%s); %d databases affected",
		len(names), summarizeNames(names), len(pending))
	var lapse time.Time
	for _, n := range names {
		a := b.agents.get(n)
		a.cut.Store(true)
		if r := a.guard.LastRenewStart(); lapse.IsZero() || r.Before(lapse) {
			lapse = r
		}
	}
	var latencies []float64
	// Shares leave failed clusters at the hub's --eviction-rate (10/s by default), so a wide
	// failover takes longer by design: allow 200 ms per affected database on top.
	timeout := 3*run.TargetSeconds + 120 + 0.2*float64(run.AffectedDatabases)
	lastSample := time.Time{}
	err = waitFor(ctx, time.Duration(timeout)*time.Second, "every affected database re-placed and Available", func() (bool, error) {
		if time.Since(lastSample) >= time.Second {
			lastSample = time.Now()
			run.Samples++
			if b.splitBrain() {
				run.SplitBrainSamples++
			}
		}
		dbs, err := b.obs.list(ctx)
		if err != nil {
			return false, err
		}
		now := time.Now()
		for i := range dbs {
			k := types.NamespacedName{Namespace: dbs[i].Namespace, Name: dbs[i].Name}
			if pending[k] && replaced(&dbs[i], cut) {
				delete(pending, k)
				latencies = append(latencies, now.Sub(lapse).Seconds())
			}
		}
		if b.every(5 * time.Second) {
			b.progress("failover: %d/%d affected databases re-placed and Available, %.0f s since the last renewal",
				run.AffectedDatabases-len(pending), run.AffectedDatabases, now.Sub(lapse).Seconds())
		}
		return len(pending) == 0, nil
	})
	run.Completed = len(latencies)
	run.Latency = percentiles(latencies)
	b.report.Failovers = append(b.report.Failovers, run)
	b.progress("failover of %d cluster(s): %d/%d re-placed and Available, from the last lease renewal p50 %.1f s, max %.1f s (target %.0f s); split-brain samples %d of %d",
		run.Clusters, run.Completed, run.AffectedDatabases, run.Latency.P50, run.Latency.Max, run.TargetSeconds, run.SplitBrainSamples, run.Samples)
	return err
}

func summarizeNames(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
}

// replaced says whether no share is left on a cut cluster (beyond one kept for graceful
// eviction) and the database is Available.
func replaced(d *dbfleetv1alpha1.DatabaseCluster, cut map[string]bool) bool {
	if !meta.IsStatusConditionTrue(d.Status.Conditions, dbfleetv1alpha1.ConditionAvailable) {
		return false
	}
	for _, p := range d.Status.Placements {
		if cut[p.Cluster] && p.Replicas > 0 && p.State != dbfleetv1alpha1.PlacementEvicting {
			return false
		}
	}
	return true
}

// splitBrain reports whether any database has unexpired member-local primary Leases in two
// clusters: two members whose database engines may both write.
func (b *bench) splitBrain() bool {
	now := time.Now()
	holders := map[string]string{}
	two := false
	for _, a := range b.agents.all() {
		a.member.Store.Each(&coordinationv1.Lease{}, func(obj client.Object) {
			l := obj.(*coordinationv1.Lease)
			if !strings.HasPrefix(l.Name, contract.PrimaryLeaseName("")) || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
				return
			}
			if l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).Before(now) {
				return
			}
			key := l.Namespace + "/" + l.Name
			if other, ok := holders[key]; ok && other != a.name {
				two = true
			}
			holders[key] = a.name
		})
	}
	return two
}

// heal reconnects cut clusters and waits until they are Ready and every database Available.
func (b *bench) heal(ctx context.Context, names []string) error {
	for _, n := range names {
		b.agents.get(n).cut.Store(false)
	}
	b.progress("failover: healed %s; waiting for it to be Ready and every database Available", summarizeNames(names))
	return waitFor(ctx, 5*time.Minute, "healed clusters Ready and every database Available", func() (bool, error) {
		for _, n := range names {
			mc := &dbfleetv1alpha1.MemberCluster{}
			if err := b.admin.Get(ctx, client.ObjectKey{Name: n}, mc); err != nil {
				return false, err
			}
			if !meta.IsStatusConditionTrue(mc.Status.Conditions, dbfleetv1alpha1.ConditionReady) {
				return false, nil
			}
		}
		dbs, err := b.obs.list(ctx)
		if err != nil {
			return false, err
		}
		for i := range dbs {
			if !meta.IsStatusConditionTrue(dbs[i].Status.Conditions, dbfleetv1alpha1.ConditionAvailable) {
				return false, nil
			}
		}
		return true, nil
	})
}

// targets checks the targets against what was measured.
func (b *bench) targets() []Target {
	r := b.report
	var ts []Target
	add := func(name, want, got string, met bool) {
		ts = append(ts, Target{Name: name, Want: want, Got: got, Met: met})
	}
	add("all databases Available after the last create", "≤ 120 s", fmt.Sprintf("%.1f s", r.Create.AfterLast),
		r.Correctness.Available == r.Create.Databases && r.Create.AfterLast <= 120)
	b.mu.Lock()
	hubRSS := b.peakRSS[procHub] >> 20
	b.mu.Unlock()
	add("hub peak RSS", "≤ 1024 MiB", fmt.Sprintf("%d MiB", hubRSS), hubRSS <= 1024)
	if s := r.Steady; s != nil {
		add("DatabaseCluster status writes in steady state", "0 per database per minute", fmt.Sprintf("%.4f", s.StatusWritesPerDBPerMinute), s.StatusWritesPerDBPerMinute == 0)
		dbRequests := 0.0
		for _, q := range s.Requests {
			if strings.HasPrefix(q.Resource, "databaseclusters") || strings.HasPrefix(q.Resource, "memberdatabases") {
				dbRequests += q.PerSecond
			}
		}
		add("steady request rate follows clusters, not databases", "requests on DatabaseClusters and MemberDatabases ≈ 0/s",
			fmt.Sprintf("%.2f/s of %.0f/s (%.3f/s per cluster)", dbRequests, s.RequestsPerSecond, s.PerCluster), dbRequests < 0.01*float64(b.cfg.Clusters))
	}
	if len(r.Failovers) > 0 {
		f := r.Failovers[0]
		add("failover of 1 cluster", fmt.Sprintf("≤ grace + toleration + 5 s = %.0f s", f.TargetSeconds),
			fmt.Sprintf("max %.1f s (%d/%d)", f.Latency.Max, f.Completed, f.AffectedDatabases), f.Completed == f.AffectedDatabases && f.Latency.Max <= f.TargetSeconds)
		splits := 0
		for _, f := range r.Failovers {
			splits += f.SplitBrainSamples
		}
		add("split-brain samples during failovers", "0", fmt.Sprint(splits), splits == 0)
	}
	if rs := r.Restart; rs != nil {
		add("hub restart writes for unchanged objects", "0 DatabaseCluster and MemberDatabase writes",
			fmt.Sprintf("%d DatabaseCluster, %d MemberDatabase", rs.DatabaseClusterWrites, rs.MemberDatabaseWrites),
			rs.DatabaseClusterWrites == 0 && rs.MemberDatabaseWrites == 0)
	}
	if !r.Correctness.Checked {
		return ts
	}
	add("correctness", "every database Available, no lost or duplicate MemberDatabases",
		fmt.Sprintf("%d/%d Available, lost %d, duplicate %d", r.Correctness.Available, r.Create.Databases, r.Correctness.Lost, r.Correctness.Duplicate),
		r.Correctness.OK(r.Create.Databases))
	return ts
}
