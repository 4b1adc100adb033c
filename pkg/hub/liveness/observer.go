// Package liveness is the hub's memory of agent lease renewals, measured on the hub's own
// monotonic clock. The clusterhealth controller feeds it; the failover gate reads it.
package liveness

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Observer remembers, per cluster, the last renew time seen on its Lease and when (on the hub's
// clock) it was seen to change. Go's time.Now carries a monotonic reading, so durations between
// observations are immune to wall-clock jumps.
type Observer struct {
	clock clock.PassiveClock
	// started is when the hub started watching: a cluster never seen renewing since then gets the
	// full grace period from here, so a hub restart does not mark the fleet Unknown.
	started time.Time

	mu   sync.Mutex
	seen map[string]observation
	// joined is when the hub first saw each cluster that has not renewed yet: a cluster joined
	// while the hub runs gets its full grace period from then, not from the hub's start.
	joined map[string]time.Time
}

type observation struct {
	renewTime  time.Time // the agent's value, compared only with itself
	observedAt time.Time // the hub's clock
}

// NewObserver starts observing now.
func NewObserver(c clock.PassiveClock) *Observer {
	return &Observer{clock: c, started: c.Now(), seen: map[string]observation{}, joined: map[string]time.Time{}}
}

// Observe records the Lease's renew time; it counts as a renewal only when the value changed.
func (o *Observer) Observe(cluster string, renewTime time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, ok := o.seen[cluster]
	if ok && prev.renewTime.Equal(renewTime) {
		return
	}
	o.seen[cluster] = observation{renewTime: renewTime, observedAt: o.clock.Now()}
	delete(o.joined, cluster)
}

// Known records that the hub knows the cluster (its MemberCluster exists). A cluster never seen
// renewing counts its silence from the first call, or from the hub's start if that is later.
func (o *Observer) Known(cluster string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[cluster]; ok {
		return
	}
	if _, ok := o.joined[cluster]; !ok {
		o.joined[cluster] = o.clock.Now()
	}
}

// SilentFor is how long, on the hub's clock, since the cluster was last seen renewing (or, if
// never, since the hub first knew it or started watching, whichever is later). It is always known: a hub that just started counts from
// its own start, which errs on the side of waiting.
func (o *Observer) SilentFor(cluster string) (time.Duration, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	last := o.started
	if obs, ok := o.seen[cluster]; ok {
		last = obs.observedAt
	} else if joined, ok := o.joined[cluster]; ok && joined.After(last) {
		last = joined
	}
	return o.clock.Since(last), true
}

// LastObserved is when the hub last saw the cluster renew; zero if never.
func (o *Observer) LastObserved(cluster string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[cluster].observedAt
}

// Forget drops a cluster that left.
func (o *Observer) Forget(cluster string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, cluster)
	delete(o.joined, cluster)
}
