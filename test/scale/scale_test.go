package scale_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/test/scale"
)

// TestSmallFleet runs the benchmark at CLUSTERS=20 DATABASES=200 as a correctness check: every
// database becomes Available and no MemberDatabase is lost or duplicated. It asserts no timing.
func TestSmallFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server and 20 agents")
	}
	cfg := scale.DefaultConfig()
	cfg.Clusters, cfg.Databases = 20, 200
	cfg.Steady, cfg.HubRestart, cfg.Failover, cfg.Profile = 0, false, false, false
	cfg.Timeout = 5 * time.Minute
	cfg.WorkDir = t.TempDir()
	cfg.Progress = testWriter{t}
	report, err := scale.Run(context.Background(), cfg)
	if err != nil {
		if report != nil {
			t.Logf("%s", report.Markdown(""))
		}
		for _, log := range []string{"hub.log"} {
			if data, rerr := os.ReadFile(cfg.WorkDir + "/" + log); rerr == nil && len(data) > 0 {
				t.Logf("%s (last 4 KiB):\n%s", log, tail(data, 4096))
			}
		}
		t.Fatal(err)
	}
	k := report.Correctness
	if !k.OK(cfg.Databases) {
		t.Errorf("correctness: %+v, want %d Available and nothing lost, duplicated or missing in members", k, cfg.Databases)
	}
	if k.MemberDatabases == 0 {
		t.Errorf("no MemberDatabases counted")
	}
	t.Logf("\n%s", report.Markdown(""))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
