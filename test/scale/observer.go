package scale

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// stages are the moments of a database the benchmark times.
type stages struct {
	scheduled, propagated, available time.Time
}

// observer watches every DatabaseCluster and records when each first reached each stage.
type observer struct {
	cache cache.Cache

	mu    sync.Mutex
	seen  map[types.NamespacedName]*stages
	count struct{ scheduled, propagated, available int }
}

func startObserver(ctx context.Context, cfg *rest.Config, opts cache.Options) (*observer, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	o := &observer{cache: c, seen: map[types.NamespacedName]*stages{}}
	inf, err := c.GetInformer(ctx, &dbfleetv1alpha1.DatabaseCluster{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.record(obj) },
		UpdateFunc: func(_, obj any) { o.record(obj) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("observer cache did not sync")
	}
	return o, nil
}

func (o *observer) record(obj any) {
	dbc, ok := obj.(*dbfleetv1alpha1.DatabaseCluster)
	if !ok {
		return
	}
	now := time.Now()
	conds := dbc.Status.Conditions
	o.mu.Lock()
	defer o.mu.Unlock()
	k := types.NamespacedName{Namespace: dbc.Namespace, Name: dbc.Name}
	s := o.seen[k]
	if s == nil {
		s = &stages{}
		o.seen[k] = s
	}
	if s.scheduled.IsZero() && meta.IsStatusConditionTrue(conds, dbfleetv1alpha1.ConditionScheduled) {
		s.scheduled = now
		o.count.scheduled++
	}
	if s.propagated.IsZero() && meta.IsStatusConditionTrue(conds, dbfleetv1alpha1.ConditionPropagated) {
		s.propagated = now
		o.count.propagated++
	}
	if s.available.IsZero() && meta.IsStatusConditionTrue(conds, dbfleetv1alpha1.ConditionAvailable) {
		s.available = now
		o.count.available++
	}
}

func (o *observer) counts() (scheduled, propagated, available int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.count.scheduled, o.count.propagated, o.count.available
}

func (o *observer) stagesOf(k types.NamespacedName) stages {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.seen[k]; s != nil {
		return *s
	}
	return stages{}
}

// list returns every DatabaseCluster as the observer's cache has it.
func (o *observer) list(ctx context.Context) ([]dbfleetv1alpha1.DatabaseCluster, error) {
	list := &dbfleetv1alpha1.DatabaseClusterList{}
	if err := o.cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return list.Items, nil
}
