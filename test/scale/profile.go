package scale

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"
)

// startProfiles takes CPU profiles of the hub (its pprof endpoint) and of the harness for up to
// 60 s from now; the returned func stops the harness profile early.
func (b *bench) startProfiles(ctx context.Context) (stop func()) {
	if !b.cfg.Profile {
		return func() {}
	}
	const seconds = 30
	hubPath := filepath.Join(b.cfg.WorkDir, "hub-cpu.pprof")
	b.profiling.Add(1)
	go func() {
		defer b.profiling.Done()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/profile?seconds=%d", b.hubPprofURL, seconds), nil)
		if err != nil {
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.progress("hub profile: %v", err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		f, err := os.Create(hubPath)
		if err != nil {
			return
		}
		defer func() { _ = f.Close() }()
		_, _ = io.Copy(f, resp.Body)
	}()
	b.report.Profiles = append(b.report.Profiles, hubPath)
	stop = b.profileHarness("harness-cpu.pprof")
	time.AfterFunc(seconds*time.Second, stop)
	return stop
}

// profileHarness starts a CPU profile of the harness process into name; the returned func
// stops it (once).
func (b *bench) profileHarness(name string) (stop func()) {
	if !b.cfg.Profile {
		return func() {}
	}
	path := filepath.Join(b.cfg.WorkDir, name)
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return func() {}
	}
	b.report.Profiles = append(b.report.Profiles, path)
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}
}
