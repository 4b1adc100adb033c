package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The benchmarks of the suite: tests that measure and log FIGURE lines (docs/performance.md) and
// assert only what must hold whatever the timing. They are heavy (pgbench for minutes, ten
// databases failing over at once), so `make test` skips them; `make bench-replication` sets
// DBFLEET_E2E_BENCH=1 and runs them.

// requireBench skips the test unless DBFLEET_E2E_BENCH=1.
func requireBench(t *testing.T) {
	t.Helper()
	if os.Getenv("DBFLEET_E2E_BENCH") != "1" {
		t.Skip("a benchmark: run it with `make bench-replication` (sets DBFLEET_E2E_BENCH=1)")
	}
}

// percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted values.
func percentile[T int64 | float64 | time.Duration](sorted []T, p float64) T {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// sortedCopy is values sorted, the input left as it was.
func sortedCopy[T int64 | float64 | time.Duration](values []T) []T {
	s := slices.Clone(values)
	slices.Sort(s)
	return s
}

// loadWatch samples the machine's load while a benchmark runs: /proc/loadavg every second, and
// the CPU time /proc/stat counts, so a figure can say how busy the 2 cores were.
type loadWatch struct {
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	maxLoad float64 // the highest 1-minute load average seen
}

func watchLoad() *loadWatch {
	l := &loadWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			if one, err := loadAverage(); err == nil {
				l.mu.Lock()
				l.maxLoad = max(l.maxLoad, one)
				l.mu.Unlock()
			}
			select {
			case <-l.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return l
}

// end stops the sampling and returns the highest 1-minute load average seen.
func (l *loadWatch) end() float64 {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxLoad
}

// loadAverage is the 1-minute load average.
func loadAverage() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, fmt.Errorf("/proc/loadavg: %q", b)
	}
	return strconv.ParseFloat(f[0], 64)
}

// loadLine is /proc/loadavg's first three fields, for a log line.
func loadLine() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// cpuTimes are the machine's busy and total CPU time (jiffies, every core) from /proc/stat.
type cpuTimes struct{ busy, total int64 }

func readCPU() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var c cpuTimes
	fields := strings.Fields(line)
	// user nice system idle iowait irq softirq steal; guest time is counted in user already.
	for i, f := range fields[1:min(9, len(fields))] {
		v, _ := strconv.ParseInt(f, 10, 64)
		c.total += v
		if i != 3 && i != 4 { // idle, iowait
			c.busy += v
		}
	}
	return c
}

// busySince is the share of the machine's CPU time (every core) spent busy since c, in percent.
func (c cpuTimes) busySince() float64 {
	now := readCPU()
	if now.total <= c.total {
		return 0
	}
	return 100 * float64(now.busy-c.busy) / float64(now.total-c.total)
}
