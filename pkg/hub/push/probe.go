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

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/hub"
	"github.com/dbfleet/dbfleet/pkg/resourcesummary"
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
	// Summary is the member's capacity, when it was ready and its Nodes and Pods could be read.
	Summary *dbfleetv1alpha1.ResourceSummary
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

// Probe asks the cluster's API server for /readyz and, when ready, /version, and adds up the
// member's capacity from its Nodes and Pods (read through the cluster's cache, as the agent does).
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
	if summary, err := resourcesummary.Summarize(ctx, cl.GetClient()); err == nil {
		r.Summary = summary
	} else {
		r.Err = fmt.Errorf("capacity of cluster %s: %w", name, err)
	}
	return r
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
