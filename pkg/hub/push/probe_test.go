package push

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// clusters is a provider holding one engaged cluster, or none.
type clusters map[string]cluster.Cluster

func (c clusters) Get(_ context.Context, name string) (cluster.Cluster, error) {
	if cl, ok := c[name]; ok {
		return cl, nil
	}
	return nil, multicluster.ErrClusterNotFound
}

// A cluster the provider has not engaged (no Secret, or a broken one) is not reached, and the
// error names the Secret the hub looks for.
func TestProbeOfAClusterNotEngaged(t *testing.T) {
	p := &Prober{Clusters: clusters{}, Timeout: time.Second}
	r := p.Probe(context.Background(), "east")
	if r.Reached || r.Ready || r.Err == nil {
		t.Fatalf("probe of an unknown cluster: %+v, want not reached with an error", r)
	}
	for _, want := range []string{"dbfleet-system/east", SecretLabel + "=true", `"` + SecretKey + `"`} {
		if !strings.Contains(r.Err.Error(), want) {
			t.Errorf("error %q does not name %s", r.Err, want)
		}
	}
}

// The probe tells an API server that answers ready, one that answers not ready, one that does
// not answer in time and one that is gone. The real API server's answers are covered by the
// hub integration suite (TestPushMemberStaysReadyAndGetsItsShare); a server that says it is not
// ready, or hangs, cannot be had from a real one on demand.
func TestProbeTellsReadyNotReadyAndUnreached(t *testing.T) {
	for _, tc := range []struct {
		name          string
		readyz        func(w http.ResponseWriter, r *http.Request)
		stop          bool
		reached, want bool
	}{
		{name: "ready", readyz: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }, reached: true, want: true},
		{name: "not ready", readyz: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("[-]etcd failed: reason withheld\nreadyz check failed"))
		}, reached: true},
		{name: "no answer in time", readyz: func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }},
		{name: "gone", readyz: func(http.ResponseWriter, *http.Request) {}, stop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/readyz":
					tc.readyz(w, r)
				case "/version":
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"gitVersion":"v1.35.4"}`))
				default:
					http.NotFound(w, r)
				}
			}))
			cl, err := cluster.New(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			if tc.stop {
				srv.Close()
			} else {
				t.Cleanup(srv.Close)
			}
			p := &Prober{Clusters: clusters{"east": cl}, Timeout: 500 * time.Millisecond}
			r := p.Probe(context.Background(), "east")
			if r.Reached != tc.reached || r.Ready != tc.want {
				t.Fatalf("probe: reached %v ready %v (%v); want reached %v ready %v", r.Reached, r.Ready, r.Err, tc.reached, tc.want)
			}
			if tc.want && r.Version != "v1.35.4" {
				t.Errorf("version %q, want v1.35.4", r.Version)
			}
			if !tc.want && r.Err == nil {
				t.Error("no error for a cluster that is not ready")
			}
		})
	}
}
