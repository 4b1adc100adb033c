package queue

import (
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// New is a controller's NewQueue option: the priority queue controller-runtime would build,
// wrapped by shutdownSafe.
func New[T comparable](log logr.Logger) func(controllerName string, rateLimiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
	return func(controllerName string, rateLimiter workqueue.TypedRateLimiter[T]) workqueue.TypedRateLimitingInterface[T] {
		return &shutdownSafe[T]{PriorityQueue: priorityqueue.New(controllerName, func(o *priorityqueue.Opts[T]) {
			o.Log = log.WithValues("controller", controllerName)
			o.RateLimiter = rateLimiter
		})}
	}
}

// shutdownSafe is a priority queue that is shut down only once no worker waits in it for an item:
// the deadlock needs a waiting worker at the moment of the shutdown. Shutting it down refuses new
// waits at once (GetWithPriority reports shutdown, as the priority queue does) and wakes the
// workers already waiting one after another with the zero item, which no controller enqueues (a
// request without a name); the last one to leave shuts the priority queue down. Everything else,
// AddWithOpts included (the hub's event handlers ask for priorities), is the priority queue's own.
type shutdownSafe[T comparable] struct {
	priorityqueue.PriorityQueue[T]

	mu sync.Mutex
	// waiting counts the workers inside the priority queue's GetWithPriority.
	waiting int
	// shut: ShutDown was called.
	shut bool
}

// GetWithPriority waits for an item, unless the queue is shut down.
func (q *shutdownSafe[T]) GetWithPriority() (_ T, priority int, shutdown bool) {
	var zero T
	q.mu.Lock()
	if q.shut {
		q.mu.Unlock()
		return zero, 0, true
	}
	q.waiting++
	q.mu.Unlock()

	item, priority, _ := q.PriorityQueue.GetWithPriority()

	q.mu.Lock()
	q.waiting--
	shut, last := q.shut, q.waiting == 0
	q.mu.Unlock()
	if !shut {
		return item, priority, false
	}
	// Shut down while this worker waited: hand the item back, and wake the next waiting worker
	// or, the last one out, shut the priority queue down.
	q.PriorityQueue.Done(item)
	if last {
		q.PriorityQueue.ShutDown()
	} else {
		q.PriorityQueue.Add(zero)
	}
	return zero, 0, true
}

// Get is GetWithPriority without the priority.
func (q *shutdownSafe[T]) Get() (item T, shutdown bool) {
	item, _, shutdown = q.GetWithPriority()
	return item, shutdown
}

// ShutDown refuses new waits and shuts the priority queue down once no worker waits in it.
func (q *shutdownSafe[T]) ShutDown() {
	q.mu.Lock()
	if q.shut {
		q.mu.Unlock()
		return
	}
	q.shut = true
	idle := q.waiting == 0
	q.mu.Unlock()
	if idle {
		q.PriorityQueue.ShutDown()
		return
	}
	var zero T
	q.PriorityQueue.Add(zero) // wakes one waiting worker, which wakes the next
}

// ShutDownWithDrain is ShutDown, as the priority queue's is.
func (q *shutdownSafe[T]) ShutDownWithDrain() { q.ShutDown() }

// ShuttingDown says ShutDown was called.
func (q *shutdownSafe[T]) ShuttingDown() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.shut
}
