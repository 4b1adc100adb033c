package scale

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Report is everything a run measured. Durations are in seconds, memory in MiB.
type Report struct {
	Started    time.Time `json:"started"`
	Command    string    `json:"command"`
	Machine    Machine   `json:"machine"`
	Simulation string    `json:"simulation"`
	Settings   Settings  `json:"settings"`

	Join        JoinFigures     `json:"join"`
	Create      CreateFigures   `json:"create"`
	Resources   []ProcessUsage  `json:"resources"`
	Steady      *SteadyFigures  `json:"steady,omitempty"`
	Restart     *RestartFigures `json:"restart,omitempty"`
	Failovers   []FailoverRun   `json:"failovers,omitempty"`
	Correctness Correctness     `json:"correctness"`
	Targets     []Target        `json:"targets"`
	Profiles    []string        `json:"profiles,omitempty"`
}

// Machine is where the run happened.
type Machine struct {
	CPUs       int     `json:"cpus"`
	MemoryGiB  float64 `json:"memoryGiB"`
	GoVersion  string  `json:"goVersion"`
	LoadBefore float64 `json:"load1Before"`
	LoadAfter  float64 `json:"load1After"`
}

// Settings are the run's parameters.
type Settings struct {
	Clusters          int     `json:"clusters"`
	Databases         int     `json:"databases"`
	ReadyAfter        float64 `json:"readyAfterSeconds"`
	HeartbeatInterval float64 `json:"heartbeatIntervalSeconds"`
	FenceAfter        float64 `json:"fenceAfterSeconds"`
	GracePeriod       float64 `json:"clusterGracePeriodSeconds"`
	Toleration        float64 `json:"unreachableTolerationSeconds"`
	SteadySeconds     float64 `json:"steadySeconds"`
	HubFlags          string  `json:"hubFlags"`
	APIServerFlags    string  `json:"apiServerFlags"`
	APIServerEnv      string  `json:"apiServerEnv"`
	HarnessGOGC       int     `json:"harnessGOGC,omitempty"`
}

// JoinFigures: joining every cluster and seeing it Ready.
type JoinFigures struct {
	Clusters     int     `json:"clusters"`
	JoinSeconds  float64 `json:"joinSeconds"`
	ReadySeconds float64 `json:"allReadySeconds"`
}

// Percentiles of a latency, in seconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// CreateFigures: creating the databases until all are Available.
type CreateFigures struct {
	Databases int `json:"databases"`
	// Available is how many became Available before the run ended; short of Databases, the
	// AllAvailable figures are when the run stopped waiting.
	AvailableCount int     `json:"availableCount"`
	MemberDBs      int     `json:"memberDatabases"`
	CreateSeconds  float64 `json:"createSeconds"`
	AllAvailableAt float64 `json:"allAvailableSecondsAfterFirstCreate"`
	AfterLast      float64 `json:"allAvailableSecondsAfterLastCreate"`
	// Throughput is databases per second from the first create to the last one reaching each stage.
	ScheduledPerSecond  float64       `json:"scheduledPerSecond"`
	PropagatedPerSecond float64       `json:"propagatedPerSecond"`
	AvailablePerSecond  float64       `json:"availablePerSecond"`
	Scheduled           Percentiles   `json:"scheduledLatency"`
	Propagated          Percentiles   `json:"propagatedLatency"`
	Available           Percentiles   `json:"availableLatency"`
	Requests            []RequestRate `json:"requests"`
	RequestsPerSecond   float64       `json:"requestsPerSecond"`
	// ClustersLapsed counts the clusters the hub marked Ready=Unknown while the databases were
	// created: every agent kept renewing, so each one is a renewal the hub API server served late.
	ClustersLapsed int `json:"clustersLapsed"`
	// UnheardRenewals counts the silences the hub did not act on while the databases were created:
	// its Lease watch had fallen behind, and a read of the Lease found a renewal.
	UnheardRenewals int `json:"unheardRenewals"`
	// WatchesClosed counts, by resource, the watches the API server closed because their client
	// did not keep up (apiserver_terminated_watchers_total): each is a gap in that client's view
	// until its reflector watches again.
	WatchesClosed map[string]int `json:"watchesClosed,omitempty"`
	// Agents are the agents' own counts while the databases were created.
	Agents *AgentFigures `json:"agents,omitempty"`
	// Histogram counts created → Available latencies in HistogramBucketSeconds-wide buckets.
	Histogram              []int   `json:"availableHistogram"`
	HistogramBucketSeconds float64 `json:"histogramBucketSeconds"`
}

// RequestRate is the hub API server's count of one verb on one resource.
type RequestRate struct {
	Verb      string  `json:"verb"`
	Resource  string  `json:"resource"`
	Count     int64   `json:"count"`
	PerSecond float64 `json:"perSecond"`
}

// ProcessUsage is one process's memory and CPU.
type ProcessUsage struct {
	Process string `json:"process"`
	PeakRSS int64  `json:"peakRSSMiB"`
	// CPU is the process's CPU time during the creation phase, and its average cores.
	CreateCPU   float64 `json:"createCPUSeconds"`
	CreateCores float64 `json:"createCores"`
	SteadyCores float64 `json:"steadyCores"`
}

// SteadyFigures: the fleet left alone.
type SteadyFigures struct {
	Seconds           float64       `json:"seconds"`
	RequestsPerSecond float64       `json:"requestsPerSecond"`
	PerCluster        float64       `json:"requestsPerSecondPerCluster"`
	PerDatabase       float64       `json:"requestsPerSecondPerDatabase"`
	Requests          []RequestRate `json:"requests"`
	// StatusWritesPerDBPerMinute are DatabaseCluster status writes (API server count).
	StatusWritesPerDBPerMinute float64 `json:"databaseClusterStatusWritesPerDatabasePerMinute"`
	// MemberDatabaseWritesPerMinute are all MemberDatabase writes (hub and agents).
	MemberDatabaseWritesPerMinute float64 `json:"memberDatabaseWritesPerMinute"`
}

// RestartFigures: the hub restarted on a steady fleet.
type RestartFigures struct {
	ResyncSeconds          float64 `json:"resyncSeconds"`
	WindowSeconds          float64 `json:"windowSeconds"`
	DatabaseClusterWrites  int64   `json:"databaseClusterWrites"`
	MemberDatabaseWrites   int64   `json:"memberDatabaseWrites"`
	MemberClusterWrites    int64   `json:"memberClusterWrites"`
	MemberClusterBaseline  float64 `json:"memberClusterWritesExpectedFromSteadyState"`
	ReconcilesAfterRestart int64   `json:"databaseClusterReconciles"`
	// Agents are the agents' own counts in the window.
	Agents *AgentFigures `json:"agents,omitempty"`
	// Writes are the write requests in the window, by verb and resource.
	Writes []RequestRate `json:"writes"`
}

// FailoverRun: clusters cut off the hub at once.
type FailoverRun struct {
	Clusters          int         `json:"clusters"`
	AffectedDatabases int         `json:"affectedDatabases"`
	Completed         int         `json:"completed"`
	Latency           Percentiles `json:"cutToReplacedAndAvailable"`
	TargetSeconds     float64     `json:"targetSeconds"`
	SplitBrainSamples int         `json:"splitBrainSamples"`
	Samples           int         `json:"samples"`
}

// Correctness: what the harness checked at the end of creation.
type Correctness struct {
	// Checked is false when the run stopped before the check.
	Checked          bool `json:"checked"`
	Available        int  `json:"available"`
	MemberDatabases  int  `json:"memberDatabases"`
	Lost             int  `json:"lost"`
	Duplicate        int  `json:"duplicate"`
	MissingInMembers int  `json:"statefulSetsMissingInMembers"`
}

// OK says whether nothing was lost or duplicated and everything became Available.
func (c Correctness) OK(databases int) bool {
	return c.Available == databases && c.Lost == 0 && c.Duplicate == 0 && c.MissingInMembers == 0
}

// Target is one goal of the issue, checked.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return round(s[max(0, min(i, len(s)-1))])
	}
	return Percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: round(s[len(s)-1])}
}

func round(x float64) float64 { return math.Round(x*100) / 100 }

func (p Percentiles) String() string {
	return fmt.Sprintf("%.2f / %.2f / %.2f / %.2f", p.P50, p.P90, p.P99, p.Max)
}

// Markdown renders the report as the table docs/performance.md carries.
func (r *Report) Markdown(svgName string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("Measured %s on %d cores, %.0f GiB (load %.2f before, %.2f after), %s.\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Machine.CPUs, r.Machine.MemoryGiB, r.Machine.LoadBefore, r.Machine.LoadAfter, r.Machine.GoVersion)
	w("Command: `%s`\n\n", r.Command)
	if f := r.Settings.APIServerFlags; f != "" {
		w("Hub API server flags: `%s`\n\n", f)
	}
	if e := r.Settings.APIServerEnv; e != "" {
		w("Hub API server and etcd environment: `%s`\n\n", e)
	}
	if g := r.Settings.HarnessGOGC; g > 0 {
		w("Harness (agents and simulated members) GOGC: %d\n\n", g)
	}
	w("Simulation: %s\n\n", r.Simulation)
	w("| figure | value |\n|---|---|\n")
	w("| clusters joined (hub join, one agent each) | %d in %.1f s; all Ready after %.1f s |\n", r.Join.Clusters, r.Join.JoinSeconds, r.Join.ReadySeconds)
	c := r.Create
	if c.MemberDBs > 0 {
		w("| DatabaseClusters created | %d in %.1f s (%d MemberDatabases) |\n", c.Databases, c.CreateSeconds, c.MemberDBs)
	} else { // not counted: the run stopped first
		w("| DatabaseClusters created | %d in %.1f s |\n", c.Databases, c.CreateSeconds)
	}
	if c.AvailableCount < c.Databases {
		w("| all Available | **not reached**: %d of %d Available when the run stopped, %.1f s after the first create and %.1f s after the last |\n",
			c.AvailableCount, c.Databases, c.AllAvailableAt, c.AfterLast)
	} else {
		w("| all Available | %.1f s after the first create, **%.1f s after the last** |\n", c.AllAvailableAt, c.AfterLast)
	}
	w("| throughput (databases/s, first create → last reaching the stage) | Scheduled %.1f · MemberDatabases written %.1f · Available %.1f |\n",
		c.ScheduledPerSecond, c.PropagatedPerSecond, c.AvailablePerSecond)
	w("| latency per database, p50 / p90 / p99 / max (s): created → Scheduled | %s |\n", c.Scheduled)
	w("| created → all MemberDatabases written | %s |\n", c.Propagated)
	w("| created → Available | %s |\n", c.Available)
	for _, p := range r.Resources {
		steady := "not measured"
		if r.Steady != nil {
			steady = fmt.Sprintf("%.2f cores", p.SteadyCores)
		}
		w("| %s: peak RSS, CPU while creating, CPU in steady state | %d MiB · %.0f s (%.2f cores) · %s |\n", p.Process, p.PeakRSS, p.CreateCPU, p.CreateCores, steady)
	}
	w("| hub API server requests while creating | %.0f/s: %s |\n", c.RequestsPerSecond, topRates(c.Requests, 8))
	w("| clusters marked Ready=Unknown while creating (their agents kept renewing) | %d |\n", c.ClustersLapsed)
	w("| silences past the grace period not acted on while creating (a read of the Lease found a renewal the hub's watch had not delivered) | %d |\n", c.UnheardRenewals)
	w("| watches the API server closed while creating because their client fell behind (`apiserver_terminated_watchers_total`) | %s |\n", closedWatchesText(c.WatchesClosed))
	w("| agents while creating (their own metrics) | %s |\n", c.Agents.text())
	if s := r.Steady; s != nil {
		w("| steady state (%.0f s): hub API server requests | %.0f/s = %.3f/s per cluster, %.4f/s per database: %s |\n",
			s.Seconds, s.RequestsPerSecond, s.PerCluster, s.PerDatabase, topRates(s.Requests, 6))
		w("| steady state: DatabaseCluster status writes per database per minute | %.4f |\n", s.StatusWritesPerDBPerMinute)
		w("| steady state: MemberDatabase writes per minute (whole fleet) | %.1f |\n", s.MemberDatabaseWritesPerMinute)
	}
	if rs := r.Restart; rs != nil {
		if rs.ResyncSeconds < 0 {
			w("| hub restart: time to resync | **not reached** in %.0f s (%d DatabaseCluster reconciles) |\n", rs.WindowSeconds, rs.ReconcilesAfterRestart)
		} else {
			w("| hub restart: time to resync | %.1f s (%d DatabaseCluster reconciles) |\n", rs.ResyncSeconds, rs.ReconcilesAfterRestart)
		}
		w("| hub restart: writes in the %.0f s after it | DatabaseClusters %d · MemberDatabases %d · MemberClusters %d (steady state alone would make %.0f): %s |\n",
			rs.WindowSeconds, rs.DatabaseClusterWrites, rs.MemberDatabaseWrites, rs.MemberClusterWrites, rs.MemberClusterBaseline, countRates(rs.Writes, 6))
		w("| hub restart: agents in that window (their own metrics) | %s |\n", rs.Agents.text())
	}
	for _, f := range r.Failovers {
		w("| failover of %d cluster(s): %d databases affected, cut → re-placed and Available p50 / p90 / p99 / max (s) | %s (%d/%d done; target %.0f s); split-brain samples %d of %d |\n",
			f.Clusters, f.AffectedDatabases, f.Latency, f.Completed, f.AffectedDatabases, f.TargetSeconds, f.SplitBrainSamples, f.Samples)
	}
	if k := r.Correctness; k.Checked {
		w("| correctness | %d/%d Available; %d MemberDatabases; lost %d, duplicate %d, StatefulSets missing in members %d |\n\n",
			k.Available, c.Databases, k.MemberDatabases, k.Lost, k.Duplicate, k.MissingInMembers)
	} else {
		w("| correctness | not checked: the run stopped before every database was Available |\n\n")
	}
	if svgName != "" {
		w("![created → Available latency](%s)\n\n", svgName)
	}
	w("| target | want | got | met |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		met := "yes"
		if !t.Met {
			met = "**no**"
		}
		w("| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, met)
	}
	return b.String()
}

func countRates(rs []RequestRate, n int) string {
	var parts []string
	for i, r := range rs {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s %d", r.Verb, r.Resource, r.Count))
	}
	return strings.Join(parts, ", ")
}

func topRates(rs []RequestRate, n int) string {
	var parts []string
	for i, r := range rs {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %s %.1f", r.Verb, r.Resource, r.PerSecond))
	}
	return strings.Join(parts, ", ")
}

// HistogramSVG draws the created → Available latency histogram.
func (r *Report) HistogramSVG() string {
	h := r.Create.Histogram
	const width, height, left, bottom, top = 720, 320, 60, 40, 30
	maxCount := 1
	for _, n := range h {
		maxCount = max(maxCount, n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">created → Available latency, %d DatabaseClusters on %d clusters (p50 %.1f s, p99 %.1f s)</text>`+"\n",
		left, r.Create.Databases, r.Join.Clusters, r.Create.Available.P50, r.Create.Available.P99)
	plotW, plotH := width-left-20, height-top-bottom
	if len(h) > 0 {
		bw := float64(plotW) / float64(len(h))
		for i, n := range h {
			bh := float64(plotH) * float64(n) / float64(maxCount)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#4a7ab5"><title>%.0f–%.0f s: %d</title></rect>`+"\n",
				float64(left)+float64(i)*bw, float64(top+plotH)-bh, math.Max(bw-1, 1), bh,
				float64(i)*r.Create.HistogramBucketSeconds, float64(i+1)*r.Create.HistogramBucketSeconds, n)
		}
		for _, frac := range []float64{0, 0.25, 0.5, 0.75, 1} {
			i := int(frac * float64(len(h)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f s</text>`+"\n",
				float64(left)+float64(i)*bw, height-bottom+15, float64(i)*r.Create.HistogramBucketSeconds)
		}
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top+plotH, width-20, top+plotH)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, top+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%d</text>`+"\n", left-4, top+8, maxCount)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">0</text>`+"\n", left-4, top+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">seconds from create to Available</text>`+"\n", left+plotW/2, height-8)
	fmt.Fprintf(&b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">databases</text>`+"\n", top+plotH/2, top+plotH/2)
	b.WriteString("</svg>\n")
	return b.String()
}

// histogram buckets xs into about 40 buckets of a round width.
func histogram(xs []float64) ([]int, float64) {
	if len(xs) == 0 {
		return nil, 1
	}
	hi := slices.Max(xs)
	width := 0.25
	for hi/width > 40 {
		width *= 2
	}
	h := make([]int, int(hi/width)+1)
	for _, x := range xs {
		h[int(x/width)]++
	}
	return h, width
}
