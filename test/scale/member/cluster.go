package member

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// Cluster is a simulated member cluster: a cluster.Cluster whose client and cache are a Store.
// Methods the agent does not use panic (the embedded interface is nil), so a new dependency of
// the agent on the member shows up at once rather than as a silent difference.
type Cluster struct {
	cluster.Cluster

	Store  *Store
	client *storeClient
	cache  *storeCache
}

// New returns a simulated member whose StatefulSets become Ready readyAfter after each change.
func New(scheme *runtime.Scheme, mapper meta.RESTMapper, readyAfter time.Duration) *Cluster {
	c := &Cluster{cache: &storeCache{informers: map[schema.GroupVersionKind]*informer{}, scheme: scheme}}
	c.Store = NewStore(scheme, readyAfter, 3, DefaultNodeAllocatable())
	c.Store.onChange = c.cache.notify
	c.client = &storeClient{Store: c.Store, scheme: scheme, mapper: mapper}
	c.cache.Store = c.Store
	return c
}

// GetClient returns the member client.
func (c *Cluster) GetClient() client.Client { return c.client }

// GetAPIReader returns the member client.
func (c *Cluster) GetAPIReader() client.Reader { return c.client }

// GetCache returns the member cache, which reads the store and tells of StatefulSet changes.
func (c *Cluster) GetCache() cache.Cache { return c.cache }

// GetFieldIndexer returns the cache, which accepts and ignores indexes.
func (c *Cluster) GetFieldIndexer() client.FieldIndexer { return c.cache }

// GetScheme returns the scheme.
func (c *Cluster) GetScheme() *runtime.Scheme { return c.client.scheme }

// GetRESTMapper returns the shared mapper.
func (c *Cluster) GetRESTMapper() meta.RESTMapper { return c.client.mapper }

// Start runs until ctx ends, then stops the readiness timers.
func (c *Cluster) Start(ctx context.Context) error {
	<-ctx.Done()
	c.Store.Close()
	return nil
}

// ServerVersion answers the agent's member health check.
func (c *Cluster) ServerVersion() (*version.Info, error) {
	return &version.Info{GitVersion: "v1.35.4-sim", Major: "1", Minor: "35"}, nil
}

// storeClient is a client.Client over a Store.
type storeClient struct {
	client.Client
	*Store
	scheme *runtime.Scheme
	mapper meta.RESTMapper
}

func (c *storeClient) Get(ctx context.Context, k client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return c.Store.Get(ctx, k, obj)
}
func (c *storeClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.Store.List(ctx, list, opts...)
}
func (c *storeClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.Store.Create(ctx, obj, opts...)
}
func (c *storeClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.Store.Update(ctx, obj, opts...)
}
func (c *storeClient) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return c.Store.Patch(ctx, obj, p, opts...)
}
func (c *storeClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.Store.Delete(ctx, obj, opts...)
}
func (c *storeClient) Scheme() *runtime.Scheme     { return c.scheme }
func (c *storeClient) RESTMapper() meta.RESTMapper { return c.mapper }
func (c *storeClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, c.scheme)
}
func (c *storeClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	return apiutil.IsObjectNamespaced(obj, c.scheme, c.mapper)
}

// storeCache is a cache.Cache over a Store whose informers hear of StatefulSet changes only:
// those are what the simulated controllers change behind the agent's back.
type storeCache struct {
	cache.Cache
	*Store
	scheme *runtime.Scheme

	mu        sync.Mutex
	informers map[schema.GroupVersionKind]*informer
}

func (c *storeCache) Get(ctx context.Context, k client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return c.Store.Get(ctx, k, obj)
}
func (c *storeCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.Store.List(ctx, list, opts...)
}

func (c *storeCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil, err
	}
	return c.informerFor(gvk), nil
}

func (c *storeCache) GetInformerForKind(_ context.Context, gvk schema.GroupVersionKind, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return c.informerFor(gvk), nil
}

func (c *storeCache) informerFor(gvk schema.GroupVersionKind) *informer {
	c.mu.Lock()
	defer c.mu.Unlock()
	inf := c.informers[gvk]
	if inf == nil {
		inf = &informer{}
		c.informers[gvk] = inf
	}
	return inf
}

func (c *storeCache) RemoveInformer(context.Context, client.Object) error { return nil }
func (c *storeCache) Start(ctx context.Context) error                     { <-ctx.Done(); return nil }
func (c *storeCache) WaitForCacheSync(context.Context) bool               { return true }
func (c *storeCache) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return nil
}

var statefulSetGVK = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// notify delivers a StatefulSet change to its informer's handlers, off the store's lock.
func (c *storeCache) notify(old, cur client.Object) {
	c.mu.Lock()
	inf := c.informers[statefulSetGVK]
	c.mu.Unlock()
	if inf == nil {
		return
	}
	go inf.deliver(old, cur)
}

// informer is a cache.Informer that is always synced and fans events out to its handlers.
type informer struct {
	mu       sync.Mutex
	handlers []toolscache.ResourceEventHandler
}

type registration struct{}

func (registration) HasSynced() bool { return true }

func (i *informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.handlers = append(i.handlers, h)
	return registration{}, nil
}
func (i *informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, _ time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}
func (i *informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, _ toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandler(h)
}
func (i *informer) RemoveEventHandler(toolscache.ResourceEventHandlerRegistration) error { return nil }
func (i *informer) AddIndexers(toolscache.Indexers) error                                { return nil }
func (i *informer) HasSynced() bool                                                      { return true }
func (i *informer) IsStopped() bool                                                      { return false }

func (i *informer) deliver(old, cur client.Object) {
	i.mu.Lock()
	hs := append([]toolscache.ResourceEventHandler(nil), i.handlers...)
	i.mu.Unlock()
	for _, h := range hs {
		switch {
		case old == nil:
			h.OnAdd(cur, false)
		case cur == nil:
			h.OnDelete(old)
		default:
			h.OnUpdate(old, cur)
		}
	}
}
