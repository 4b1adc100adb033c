package queue

import (
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// Workers that go on getting, requeueing and finishing items while the queue shuts down all
// return, round after round: a controller's Start waits for them. On the bare priority queue of
// controller-runtime v0.23.3 some round leaves a worker stuck in Done (the upstream deadlock).
func TestWorkersReturnWhenTheQueueShutsDown(t *testing.T) {
	for round := range 300 {
		q := New[int](logr.Discard())("test", workqueue.DefaultTypedControllerRateLimiter[int]())
		pq := q.(priorityqueue.PriorityQueue[int])
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(i % 3)}, w*1000+i%10)
					item, _, shutdown := pq.GetWithPriority()
					if shutdown {
						return
					}
					q.Done(item)
				}
			})
		}
		time.Sleep(time.Millisecond)
		q.ShutDown()
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a worker did not return 10s after the queue shut down", round)
		}
	}
}
