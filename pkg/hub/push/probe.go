package push

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/dbfleet/dbfleet/pkg/hub"
)

// Clusters gives the connection the hub holds to an engaged Push cluster: the kubeconfig
// provider.
type Clusters interface {
	Get(ctx context.Context, clusterName string) (cluster.Cluster, error)
}

// Reachability is what one probe of a Push cluster's API server found.
type Reachability struct {
	// Reached: the API server answered, whatever it said.
	Reached bool
	// Ready: it answered /readyz with ok.
	Ready bool
	// Version is its gitVersion, when it was ready and said.
	Version string
	// Err says why it is not Ready.
	Err error
}

// Prober checks that the hub reaches Push clusters' API servers, through the very connections
// the provider engaged them with: what the probe sees is what the push controller's reconciles
// will meet.
type Prober struct {
	Clusters Clusters
	// Timeout bounds each probe: a server that does not answer in time was not reached.
	Timeout time.Duration
}

// Probe asks the cluster's API server for /readyz and, when ready, /version.
func (p *Prober) Probe(ctx context.Context, name string) Reachability {
	cl, err := p.Clusters.Get(ctx, name)
	if err != nil {
		return Reachability{Err: fmt.Errorf("the hub holds no connection to cluster %s (is there a Secret %s/%s labelled %s=true with a valid kubeconfig under %q?): %w",
			name, hub.Namespace, SecretName(name), SecretLabel, SecretKey, err)}
	}
	disco, err := discovery.NewDiscoveryClientForConfigAndClient(rest.CopyConfig(cl.GetConfig()), cl.GetHTTPClient())
	if err != nil {
		return Reachability{Err: fmt.Errorf("client for cluster %s: %w", name, err)}
	}
	rc := disco.RESTClient()
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.Timeout)
		defer cancel()
	}
	code := 0
	body, err := rc.Get().AbsPath("/readyz").Do(ctx).StatusCode(&code).Raw()
	if code == 0 { // no HTTP answer at all
		if err == nil {
			err = errors.New("no answer")
		}
		return Reachability{Err: fmt.Errorf("GET /readyz on cluster %s: %w", name, err)}
	}
	if err != nil || code != 200 {
		return Reachability{Reached: true, Err: fmt.Errorf("GET /readyz on cluster %s: HTTP %d: %s", name, code, truncate(body, 512))}
	}
	r := Reachability{Reached: true, Ready: true}
	if raw, err := rc.Get().AbsPath("/version").Do(ctx).Raw(); err == nil {
		info := version.Info{}
		if json.Unmarshal(raw, &info) == nil {
			r.Version = info.GitVersion
		}
	}
	return r
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
