package clusterhealth

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// observer remembers, per cluster, the last renew time seen on its Lease and when (on the hub's
// clock) it was seen to change. Go's time.Now carries a monotonic reading, so durations between
// observations are immune to wall-clock jumps.
type observer struct {
	clock clock.PassiveClock
	// started is when the hub started watching: a cluster never seen renewing since then gets the
	// full grace period from here, so a hub restart does not mark the fleet Unknown.
	started time.Time

	mu   sync.Mutex
	seen map[string]observation
}

type observation struct {
	renewTime  time.Time // the agent's value, compared only with itself
	observedAt time.Time // the hub's clock
}

func newObserver(c clock.PassiveClock) *observer {
	return &observer{clock: c, started: c.Now(), seen: map[string]observation{}}
}

// observe records the Lease's renew time; it counts as a renewal only when the value changed.
func (o *observer) observe(cluster string, renewTime time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, ok := o.seen[cluster]
	if ok && prev.renewTime.Equal(renewTime) {
		return
	}
	o.seen[cluster] = observation{renewTime: renewTime, observedAt: o.clock.Now()}
}

// silentFor is how long, on the hub's clock, since the cluster was last seen renewing (or since
// the hub started watching, if never).
func (o *observer) silentFor(cluster string) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	last := o.started
	if obs, ok := o.seen[cluster]; ok {
		last = obs.observedAt
	}
	return o.clock.Since(last)
}

// lastObserved is when the hub last saw the cluster renew; zero if never.
func (o *observer) lastObserved(cluster string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[cluster].observedAt
}

// forget drops a cluster that left.
func (o *observer) forget(cluster string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, cluster)
}
