package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

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
