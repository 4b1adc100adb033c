package scale

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dbfleet/dbfleet/test/framework"
)

// createDatabases creates the policies and the databases, and waits until all are Available.
func (b *bench) createDatabases(ctx context.Context) error {
	ng := groups(b.cfg.Clusters)
	if err := b.createPolicies(ctx, ng); err != nil {
		return err
	}
	if err := createNamespaces(ctx, b.admin); err != nil {
		return err
	}
	var err error
	if b.obs, err = startObserver(ctx, b.env.Config, cache.Options{Scheme: framework.Scheme}); err != nil {
		return err
	}
	b.progress("created %d ClusterPropagationPolicies (4 kinds in each of %d groups); creating %d DatabaseClusters", 4*ng, ng, b.cfg.Databases)

	before, err := b.sampleCounters(ctx)
	if err != nil {
		return err
	}
	stopProfiles := b.startProfiles(ctx)
	first := time.Now()
	lastCreate, err := b.createDatabaseClusters(ctx, ng)
	if err != nil {
		stopProfiles()
		return err
	}
	b.progress("created %d DatabaseClusters in %.1f s; waiting for all to be Available", b.cfg.Databases, lastCreate.Sub(first).Seconds())
	err = waitFor(ctx, b.cfg.Timeout, "every DatabaseCluster Available", func() (bool, error) {
		_, _, available := b.obs.counts()
		if b.every(5 * time.Second) {
			b.createProgress(b.cfg.Databases)
		}
		return available == b.cfg.Databases, nil
	})
	stopProfiles()
	allAvailable := time.Now()
	b.recordCreate(ctx, before, first, lastCreate, allAvailable)
	if err != nil {
		return err
	}
	c := b.report.Create
	b.progress("all %d Available %.1f s after the last create; created → Available p50 %.2f s, p99 %.2f s",
		b.cfg.Databases, c.AfterLast, c.Available.P50, c.Available.P99)
	return nil
}

// createPolicies creates the ClusterPropagationPolicies of each of the ng groups of clusters.
func (b *bench) createPolicies(ctx context.Context, ng int) error {
	for g := range ng {
		var members []string
		for i := g * groupSize; i < min((g+1)*groupSize, b.cfg.Clusters); i++ {
			members = append(members, clusterName(i))
		}
		for _, p := range policies(g, members) {
			if err := client.IgnoreAlreadyExists(b.admin.Create(ctx, p)); err != nil {
				return fmt.Errorf("create ClusterPropagationPolicy %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// counters are what the creation phase's figures are measured from: the hub API server's
// metrics, every process's CPU time, the hub's cluster lapses and the agents' counts.
type counters struct {
	metrics         families
	cpu             map[string]procSample
	lapsed, unheard int
	agents          AgentFigures
}

// sampleCounters reads the counters before the databases are created.
func (b *bench) sampleCounters(ctx context.Context) (counters, error) {
	metrics, err := b.metricsGet(ctx)
	if err != nil {
		return counters{}, err
	}
	c := counters{metrics: metrics, cpu: b.cpuSnapshot()}
	c.lapsed, c.unheard = b.clustersLapsed(ctx)
	c.agents = agentCounts()
	return c, nil
}

// createDatabaseClusters creates the run's DatabaseClusters as creatorUser from 16 workers,
// records when each was created, and returns when the last create returned; it stops at the
// first failed create.
func (b *bench) createDatabaseClusters(ctx context.Context, ng int) (lastCreate time.Time, err error) {
	var last atomic.Int64
	var createdN atomic.Int64
	work := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				dbc := database(i, ng)
				if err := b.creator.Create(ctx, dbc); err != nil {
					select {
					case errs <- fmt.Errorf("create DatabaseCluster %s/%s: %w", dbc.Namespace, dbc.Name, err):
					default:
					}
					continue
				}
				now := time.Now()
				b.mu.Lock()
				b.created[types.NamespacedName{Namespace: dbc.Namespace, Name: dbc.Name}] = now
				b.mu.Unlock()
				last.Store(now.UnixNano())
				createdN.Add(1)
			}
		})
	}
	produceErr := func() error {
		defer func() { close(work); wg.Wait() }()
		for i := range b.cfg.Databases {
			select {
			case work <- i:
			case err := <-errs:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
			if b.every(5 * time.Second) {
				b.createProgress(int(createdN.Load()))
			}
		}
		return nil
	}()
	if produceErr == nil {
		select {
		case produceErr = <-errs:
		default:
		}
	}
	if produceErr != nil {
		return time.Time{}, produceErr
	}
	return time.Unix(0, last.Load()), nil
}

// recordCreate fills the report's creation figures and each process's CPU use since before.
func (b *bench) recordCreate(ctx context.Context, before counters, first, lastCreate, allAvailable time.Time) {
	// Read the figures even when ctx was cancelled: a stopped run still reports what it saw.
	metricsAfter, merr := b.metricsGet(context.WithoutCancel(ctx))
	cpuAfter := b.cpuSnapshot()
	b.fillCreate(first, lastCreate, allAvailable, before.metrics, metricsAfter, merr)
	b.report.Create.Agents = agentCounts().since(before.agents)
	lapsed, unheard := b.clustersLapsed(context.WithoutCancel(ctx))
	b.report.Create.ClustersLapsed, b.report.Create.UnheardRenewals = lapsed-before.lapsed, unheard-before.unheard
	for _, name := range []string{procHub, procAPIServer, procEtcd, procHarness} {
		cpu, avg := cores(before.cpu, cpuAfter, name)
		b.report.Resources = append(b.report.Resources, ProcessUsage{Process: name, CreateCPU: round(cpu.Seconds()), CreateCores: avg})
	}
}

func (b *bench) createProgress(created int) {
	s, p, a := b.obs.counts()
	hub := b.cpuSnapshot()[procHub]
	lapsed, unheard := b.clustersLapsed(context.Background())
	b.progress("databases: %d created, %d Scheduled, %d MemberDatabases written, %d Available | hub RSS %d MiB, %d cluster lapses so far (%d silences not confirmed)",
		created, s, p, a, hub.RSS>>20, lapsed, unheard)
}

// clustersLapsed is how many times the hub has marked a cluster Ready=Unknown (its failure
// detection histogram's count), and how many silences it did not act on because a read of the
// Lease found a renewal its watch had not delivered; zeros when the hub cannot be read.
func (b *bench) clustersLapsed(ctx context.Context) (lapsed, unheard int) {
	m, err := httpMetrics(ctx, b.hubMetricsURL)
	if err != nil {
		return 0, 0
	}
	return int(m.observations("dbfleet_hub_cluster_failure_detection_seconds")),
		int(m.sum("dbfleet_hub_lease_silence_checks_total", map[string]string{"result": "renewed"}))
}

func (b *bench) fillCreate(first, lastCreate, allAvailable time.Time, before, after families, merr error) {
	var sched, prop, avail []float64
	var lastSched, lastProp, lastAvail time.Time
	b.mu.Lock()
	for k, created := range b.created {
		s := b.obs.stagesOf(k)
		if !s.scheduled.IsZero() {
			sched = append(sched, s.scheduled.Sub(created).Seconds())
			lastSched = latest(lastSched, s.scheduled)
		}
		if !s.propagated.IsZero() {
			prop = append(prop, s.propagated.Sub(created).Seconds())
			lastProp = latest(lastProp, s.propagated)
		}
		if !s.available.IsZero() {
			avail = append(avail, s.available.Sub(created).Seconds())
			lastAvail = latest(lastAvail, s.available)
		}
	}
	b.mu.Unlock()
	perSecond := func(n int, until time.Time) float64 {
		if until.IsZero() || !until.After(first) {
			return 0
		}
		return round(float64(n) / until.Sub(first).Seconds())
	}
	for i := range avail {
		avail[i] = max(avail[i], 0)
	}
	h, width := histogram(avail)
	c := CreateFigures{
		Databases: b.cfg.Databases, CreateSeconds: round(lastCreate.Sub(first).Seconds()),
		AllAvailableAt: round(allAvailable.Sub(first).Seconds()), AfterLast: round(allAvailable.Sub(lastCreate).Seconds()),
		ScheduledPerSecond: perSecond(len(sched), lastSched), PropagatedPerSecond: perSecond(len(prop), lastProp),
		AvailablePerSecond: perSecond(len(avail), lastAvail),
		Scheduled:          percentiles(sched), Propagated: percentiles(prop), Available: percentiles(avail),
		Histogram: h, HistogramBucketSeconds: width, AvailableCount: len(avail),
	}
	if merr == nil {
		d := allAvailable.Sub(first)
		c.Requests = rates(before.requests(), after.requests(), d)
		c.RequestsPerSecond = round(total(c.Requests) / d.Seconds())
		c.WatchesClosed = closedWatches(before, after)
	}
	b.report.Create = c
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func total(rs []RequestRate) float64 {
	var n float64
	for _, r := range rs {
		n += float64(r.Count)
	}
	return n
}
