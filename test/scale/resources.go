package scale

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadBefore: load1()}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
				m.MemoryGiB = round(kb / 1024 / 1024)
			}
		}
	}
	return m
}

func load1() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	return v
}

// sampleRSS keeps the peak resident memory of each process.
func (b *bench) sampleRSS(ctx context.Context) {
	for {
		for name, pid := range b.pids() {
			if s, err := sampleProc(pid); err == nil {
				b.mu.Lock()
				b.peakRSS[name] = max(b.peakRSS[name], s.RSS)
				b.mu.Unlock()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// Process names in the report.
const (
	procHub       = "hub (hub run)"
	procAPIServer = "hub kube-apiserver"
	procEtcd      = "etcd"
	procHarness   = "harness (agents + simulated members)"
)

func (b *bench) pids() map[string]int {
	m := map[string]int{procAPIServer: b.apiPid, procEtcd: b.etcdPid, procHarness: os.Getpid()}
	if b.hub != nil {
		if exited, _ := b.hub.Exited(); !exited {
			m[procHub] = b.hub.Pid()
		}
	}
	return m
}

// cpuSnapshot samples every process's CPU time.
func (b *bench) cpuSnapshot() map[string]procSample {
	out := map[string]procSample{}
	for name, pid := range b.pids() {
		if s, err := sampleProc(pid); err == nil {
			out[name] = s
		}
	}
	return out
}

func cores(before, after map[string]procSample, name string) (cpu time.Duration, avg float64) {
	a, okA := after[name]
	s, okB := before[name]
	if !okA || !okB || !a.At.After(s.At) {
		return 0, 0
	}
	cpu = a.CPU - s.CPU
	return cpu, round(cpu.Seconds() / a.At.Sub(s.At).Seconds())
}

func (b *bench) fillResources() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.report.Resources {
		b.report.Resources[i].PeakRSS = b.peakRSS[b.report.Resources[i].Process] >> 20
	}
}
