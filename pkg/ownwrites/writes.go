// Package ownwrites lets a controller tell that its informer cache has not yet caught up with
// a write the controller made itself.
//
// A reconcile that writes an object is often followed at once by another reconcile of the same
// object (woken by the write's side effects, such as the children it created), which reads the
// object from the cache before the watch event of that write has arrived. Acting on that older
// state repeats the previous reconcile: the same decision, its Events and its writes again.
// Kubernetes resource versions are comparable integers (KEP-5504), so remembering the version of
// the controller's last write is enough to recognise the older copy and wait for the newer one.
package ownwrites

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Tracker remembers, per object, the resourceVersion the API server gave the controller's last
// write of it (and, if the controller wants, what it wrote), until the cache has shown that
// version or a later one. It is safe for concurrent use; controller-runtime never reconciles one
// object in two workers at once, so the calls for one key come in order.
type Tracker struct {
	written sync.Map // types.NamespacedName → *write (a pointer: CompareAndDelete compares values)
}

type write struct {
	resourceVersion string
	value           any
}

// Wrote records that the controller's write of key was answered with resourceVersion rv.
func (t *Tracker) Wrote(key types.NamespacedName, rv string) {
	t.WroteValue(key, rv, nil)
}

// WroteValue is Wrote, remembering value (what was written) for Last.
func (t *Tracker) WroteValue(key types.NamespacedName, rv string, value any) {
	if rv != "" {
		t.written.Store(key, &write{resourceVersion: rv, value: value})
	}
}

// Behind reports whether cachedRV, the resourceVersion of key as the cache shows it, is older
// than the controller's last write of key. Once the cache has caught up the write is forgotten.
// Versions that are not comparable integers (an API server that does not promise KEP-5504) are
// never called behind: the controller then acts as it would without the tracker.
func (t *Tracker) Behind(key types.NamespacedName, cachedRV string) bool {
	_, behind := t.Last(key, cachedRV)
	return behind
}

// Last is Behind, also returning the value given to WroteValue when the cache is behind.
func (t *Tracker) Last(key types.NamespacedName, cachedRV string) (any, bool) {
	v, ok := t.written.Load(key)
	if !ok {
		return nil, false
	}
	w := v.(*write)
	cmp, err := resourceversion.CompareResourceVersion(cachedRV, w.resourceVersion)
	if err == nil && cmp < 0 {
		return w.value, true
	}
	t.written.CompareAndDelete(key, v)
	return nil, false
}

// Forget drops what is remembered of key, for an object that is gone.
func (t *Tracker) Forget(key types.NamespacedName) {
	t.written.Delete(key)
}
