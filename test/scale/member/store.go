package member

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// key names one stored object: its Go type, namespace and name.
type key struct {
	kind      reflect.Type
	namespace string
	name      string
}

// Store is one simulated member API server: objects by key, with resourceVersion, generation
// and StatefulSet readiness handled as the real server and controllers would, and nothing else
// (no admission, no field ownership). It is safe for concurrent use.
type Store struct {
	scheme     *runtime.Scheme
	readyAfter time.Duration
	// onChange is told of StatefulSet changes, as a watch would.
	onChange func(old, cur client.Object)

	mu      sync.Mutex
	objects map[key]client.Object
	rv      int64
	closed  bool
	timers  map[key]*time.Timer
}

// NewStore returns a store holding nodes Ready Nodes of the given allocatable resources.
func NewStore(scheme *runtime.Scheme, readyAfter time.Duration, nodes int, allocatable corev1.ResourceList) *Store {
	s := &Store{scheme: scheme, readyAfter: readyAfter, objects: map[key]client.Object{}, timers: map[key]*time.Timer{}}
	for i := range nodes {
		n := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "node-" + strconv.Itoa(i)},
			Status: corev1.NodeStatus{
				Allocatable: allocatable.DeepCopy(),
				Capacity:    allocatable.DeepCopy(),
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		_ = s.create(n)
	}
	return s
}

// DefaultNodeAllocatable is a roomy node, so capacity never limits placement in the benchmark.
func DefaultNodeAllocatable() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
}

// Close stops pending readiness timers.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for k, t := range s.timers {
		t.Stop()
		delete(s.timers, k)
	}
}

func keyOf(obj client.Object) key {
	return key{kind: reflect.TypeOf(obj), namespace: obj.GetNamespace(), name: obj.GetName()}
}

func (s *Store) notFound(obj client.Object, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(reflect.TypeOf(obj).Elem().Name())}, name)
}

// copyInto sets *dst to a deep copy of src (both the same pointer type).
func copyInto(dst, src client.Object) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
}

func (s *Store) nextRV() string {
	s.rv++
	return strconv.FormatInt(s.rv, 10)
}

// Get copies the stored object into obj.
func (s *Store) Get(_ context.Context, k client.ObjectKey, obj client.Object) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, ok := s.objects[key{kind: reflect.TypeOf(obj), namespace: k.Namespace, name: k.Name}]
	if !ok {
		return s.notFound(obj, k.Name)
	}
	copyInto(obj, stored)
	return nil
}

// List fills list with the stored objects of its item type, filtered by namespace and labels.
func (s *Store) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	items := reflect.ValueOf(list).Elem().FieldByName("Items")
	if !items.IsValid() {
		return fmt.Errorf("list %T has no Items", list)
	}
	itemType := reflect.PointerTo(items.Type().Elem())
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []runtime.Object
	for k, obj := range s.objects {
		if k.kind != itemType || (o.Namespace != "" && k.namespace != o.Namespace) {
			continue
		}
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		out = append(out, obj.DeepCopyObject())
	}
	return meta.SetList(list, out)
}

// Create stores a new object.
func (s *Store) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.create(obj)
}

func (s *Store) create(obj client.Object) error {
	k := keyOf(obj)
	if _, ok := s.objects[k]; ok {
		return apierrors.NewAlreadyExists(schema.GroupResource{Resource: k.kind.Elem().Name()}, k.name)
	}
	obj.SetResourceVersion(s.nextRV())
	obj.SetUID(types.UID(fmt.Sprintf("sim-%d", s.rv)))
	obj.SetGeneration(1)
	obj.SetCreationTimestamp(metav1.Now())
	stored := obj.DeepCopyObject().(client.Object)
	s.objects[k] = stored
	s.changed(nil, stored)
	return nil
}

// Update replaces an existing object, keeping its status (the status subresource's job).
func (s *Store) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replace(obj, false)
}

// Patch treats both apply and merge patches as the full desired object: the agent sends
// everything it owns, and nothing else writes to these objects in the simulation.
func (s *Store) Patch(_ context.Context, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replace(obj, true)
}

func (s *Store) replace(obj client.Object, upsert bool) error {
	k := keyOf(obj)
	old, ok := s.objects[k]
	if !ok {
		if !upsert {
			return s.notFound(obj, k.name)
		}
		return s.create(obj)
	}
	if rv := obj.GetResourceVersion(); !upsert && rv != "" && rv != old.GetResourceVersion() {
		return apierrors.NewConflict(schema.GroupResource{Resource: k.kind.Elem().Name()}, k.name, fmt.Errorf("the object has been modified"))
	}
	cur := obj.DeepCopyObject().(client.Object)
	cur.SetUID(old.GetUID())
	cur.SetCreationTimestamp(old.GetCreationTimestamp())
	cur.SetGeneration(old.GetGeneration())
	cur.SetResourceVersion(old.GetResourceVersion())
	keepStatus(cur, old)
	if !equalSpec(cur, old) {
		cur.SetGeneration(old.GetGeneration() + 1)
	}
	if equality.Semantic.DeepEqual(cur, old) {
		setInto(obj, cur)
		return nil // a no-op write keeps the resourceVersion, as the API server does
	}
	cur.SetResourceVersion(s.nextRV())
	s.objects[k] = cur
	copyInto(obj, cur)
	s.changed(old, cur)
	return nil
}

// setInto sets *dst to *src without copying: src must not be stored.
func setInto(dst, src client.Object) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src).Elem())
}

// keepStatus copies old's Status field into cur, when the type has one.
func keepStatus(cur, old client.Object) {
	dst := reflect.ValueOf(cur).Elem().FieldByName("Status")
	src := reflect.ValueOf(old).Elem().FieldByName("Status")
	if dst.IsValid() && src.IsValid() && dst.CanSet() {
		dst.Set(src)
	}
}

func equalSpec(a, b client.Object) bool {
	sa := reflect.ValueOf(a).Elem().FieldByName("Spec")
	sb := reflect.ValueOf(b).Elem().FieldByName("Spec")
	if !sa.IsValid() || !sb.IsValid() {
		return true
	}
	return equality.Semantic.DeepEqual(sa.Interface(), sb.Interface())
}

// Delete removes an object.
func (s *Store) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := keyOf(obj)
	old, ok := s.objects[k]
	if !ok {
		return s.notFound(obj, k.name)
	}
	o := (&client.DeleteOptions{}).ApplyOptions(opts)
	if o.Preconditions != nil && o.Preconditions.ResourceVersion != nil && *o.Preconditions.ResourceVersion != old.GetResourceVersion() {
		return apierrors.NewConflict(schema.GroupResource{Resource: k.kind.Elem().Name()}, k.name, fmt.Errorf("precondition failed"))
	}
	delete(s.objects, k)
	if t := s.timers[k]; t != nil {
		t.Stop()
		delete(s.timers, k)
	}
	s.changed(old, nil)
	return nil
}

// changed tells the watchers of a StatefulSet change and schedules its readiness. s.mu is held.
func (s *Store) changed(old, cur client.Object) {
	sts, ok := cur.(*appsv1.StatefulSet)
	if !ok {
		if _, wasSts := old.(*appsv1.StatefulSet); wasSts && s.onChange != nil {
			s.onChange(old, nil)
		}
		return
	}
	if s.onChange != nil {
		s.onChange(old, cur)
	}
	if sts.Status.ObservedGeneration == sts.Generation && sts.Status.ReadyReplicas == ptrValue(sts.Spec.Replicas) {
		return
	}
	k := keyOf(sts)
	if t := s.timers[k]; t != nil {
		t.Stop()
	}
	if s.closed {
		return
	}
	s.timers[k] = time.AfterFunc(s.readyAfter, func() { s.markReady(k) })
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// markReady reports every replica of a StatefulSet Ready at its current generation, as the
// StatefulSet controller does once the kubelet reports the pods Ready.
func (s *Store) markReady(k key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.timers, k)
	old, ok := s.objects[k].(*appsv1.StatefulSet)
	if !ok || s.closed {
		return
	}
	cur := old.DeepCopy()
	n := ptrValue(cur.Spec.Replicas)
	cur.Status = appsv1.StatefulSetStatus{
		ObservedGeneration: cur.Generation,
		Replicas:           n, ReadyReplicas: n, CurrentReplicas: n, UpdatedReplicas: n, AvailableReplicas: n,
	}
	cur.SetResourceVersion(s.nextRV())
	s.objects[k] = cur
	if s.onChange != nil {
		s.onChange(old, cur)
	}
}

// Count returns how many objects of obj's type the store holds.
func (s *Store) Count(obj client.Object) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := reflect.TypeOf(obj)
	n := 0
	for k := range s.objects {
		if k.kind == t {
			n++
		}
	}
	return n
}

// Each calls fn with each stored object of obj's type (a shared copy: do not modify).
func (s *Store) Each(obj client.Object, fn func(client.Object)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := reflect.TypeOf(obj)
	for k, o := range s.objects {
		if k.kind == t {
			fn(o)
		}
	}
}
