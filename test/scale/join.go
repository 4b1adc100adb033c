package scale

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/join"
)

// joinClusters joins every cluster with pkg/join, starts its agent, and waits until the hub
// sees them all Ready.
func (b *bench) joinClusters(ctx context.Context) error {
	ep, err := join.HubEndpointFromConfig(b.env.Config)
	if err != nil {
		return err
	}
	b.progress("joining %d clusters (hub join as a library) and starting their agents", b.cfg.Clusters)
	start := time.Now()
	var joined atomic.Int64
	work := make(chan int)
	errs := make(chan error, b.cfg.Clusters)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if err := b.joinOne(ctx, ep, i); err != nil {
					errs <- err
					continue
				}
				joined.Add(1)
			}
		})
	}
	go func() {
		for range time.Tick(5 * time.Second) {
			if n := joined.Load(); n < int64(b.cfg.Clusters) && ctx.Err() == nil {
				b.progress("joined %d/%d", n, b.cfg.Clusters)
			} else {
				return
			}
		}
	}()
	for i := range b.cfg.Clusters {
		select {
		case work <- i:
		case err := <-errs:
			close(work)
			wg.Wait()
			return err
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	b.report.Join = JoinFigures{Clusters: b.cfg.Clusters, JoinSeconds: round(time.Since(start).Seconds())}
	b.progress("joined %d clusters in %.1f s; waiting for all to be Ready", b.cfg.Clusters, b.report.Join.JoinSeconds)
	err = waitFor(ctx, 5*time.Minute+time.Duration(b.cfg.Clusters)*200*time.Millisecond, "every MemberCluster Ready", func() (bool, error) {
		list := &dbfleetv1alpha1.MemberClusterList{}
		if err := b.admin.List(ctx, list); err != nil {
			return false, err
		}
		ready := 0
		for i := range list.Items {
			if meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, dbfleetv1alpha1.ConditionReady) {
				ready++
			}
		}
		if b.every(5 * time.Second) {
			b.progress("%d/%d MemberClusters Ready", ready, b.cfg.Clusters)
		}
		return ready == b.cfg.Clusters, nil
	})
	b.report.Join.ReadySeconds = round(time.Since(start).Seconds())
	if err == nil {
		b.progress("all %d clusters Ready %.1f s after the first join", b.cfg.Clusters, b.report.Join.ReadySeconds)
	}
	return err
}

func (b *bench) joinOne(ctx context.Context, ep join.HubEndpoint, i int) error {
	name := clusterName(i)
	o := join.NewOptions(name)
	o.Region, o.Zone = regionOf(i), regionOf(i)+"-a"
	o.Labels = map[string]string{labelGroup: groupName(groupOf(i))}
	o.HeartbeatInterval, o.FenceAfter = b.cfg.HeartbeatInterval, b.cfg.FenceAfter
	res, err := join.Join(ctx, b.admin, ep, o)
	if err != nil {
		return fmt.Errorf("join %s: %w", name, err)
	}
	a, err := startAgent(ctx, &b.settings, name, res.HubKubeconfig)
	if err != nil {
		return err
	}
	b.agents.add(a)
	return nil
}
