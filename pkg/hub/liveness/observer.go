package liveness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// RenewReader reads a cluster's agent Lease from the API server itself, not from a cache: its
// renew time, or found false when there is no Lease or it was never renewed.
type RenewReader func(ctx context.Context, cluster string) (renewTime time.Time, found bool, err error)

// Observer remembers, per cluster, the last renew time seen on its Lease and when (on the hub's
// clock) it was seen to change. Go's time.Now carries a monotonic reading, so durations between
// observations are immune to wall-clock jumps.
type Observer struct {
	clock clock.PassiveClock
	// started is when the hub started watching: a cluster never seen renewing since then gets the
	// full grace period from here, so a hub restart does not mark the fleet Unknown.
	started time.Time

	// read confirms a silence before the hub acts on it; nil: never confirmed (unit tests).
	read RenewReader

	mu   sync.Mutex
	seen map[string]observation
	// confirmed is, per cluster, the last silence a read of the API server confirmed.
	confirmed map[string]confirmation
	// joined is when the hub first saw each cluster that has not renewed yet: a cluster joined
	// while the hub runs gets its full grace period from then, not from the hub's start.
	joined map[string]time.Time
}

type observation struct {
	renewTime  time.Time // the agent's value, compared only with itself
	observedAt time.Time // the hub's clock
	// first is set while renewTime is the first value this hub saw (its start-up list of the
	// Leases, say): a value found, not a renewal seen, which says nothing of the agent being alive.
	first bool
}

// confirmation is a silence the API server confirmed: no renewal after the one observed at since
// (the hub's clock; zero: none observed), which had then lasted silent.
type confirmation struct {
	since  time.Time
	silent time.Duration
}

// NewObserver starts observing now.
func NewObserver(c clock.PassiveClock) *Observer {
	return &Observer{clock: c, started: c.Now(), seen: map[string]observation{}, joined: map[string]time.Time{}, confirmed: map[string]confirmation{}}
}

// SetReader sets how a silence is confirmed against the API server (see ConfirmedSilentFor).
// Call it before the observer is shared.
func (o *Observer) SetReader(read RenewReader) {
	o.read = read
}

// Observe records the Lease's renew time; it counts as a renewal only when the value changed.
func (o *Observer) Observe(cluster string, renewTime time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, ok := o.seen[cluster]
	if ok && prev.renewTime.Equal(renewTime) {
		return
	}
	o.seen[cluster] = observation{renewTime: renewTime, observedAt: o.clock.Now(), first: !ok}
	delete(o.joined, cluster)
}

// Renewed reports whether this hub has seen the cluster's Lease renewed: its renew time changed
// after the first value the hub saw. A hub that starts finds each Lease as its agent last renewed
// it, perhaps long ago: that first value is no sign of life.
func (o *Observer) Renewed(cluster string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	obs, ok := o.seen[cluster]
	return ok && !obs.first
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
	silent, _ := o.silentLocked(cluster)
	return silent, true
}

// silentLocked is SilentFor, and the observation it counts from (zero: none). o.mu is held.
func (o *Observer) silentLocked(cluster string) (time.Duration, time.Time) {
	last := o.started
	obs, ok := o.seen[cluster]
	if ok {
		last = obs.observedAt
	} else if joined, ok := o.joined[cluster]; ok && joined.After(last) {
		last = joined
	}
	return o.clock.Since(last), obs.observedAt
}

// LastObserved is when the hub last saw the cluster renew; zero if never.
func (o *Observer) LastObserved(cluster string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seen[cluster].observedAt
}

// ConfirmedSilentFor is SilentFor, with a silence of at least over checked against the API
// server before the hub acts on it. The watch that feeds the Observer can fall behind (the hub or
// the API server stalled, a watch being re-established): then the hub has not heard renewals that
// the API server has, and a silence it merely failed to hear must neither mark a live cluster
// Ready=Unknown nor let another cluster be promoted while the agent still holds its primary. The
// read counts as an observation: a renew time the watch had not delivered yet restarts the
// silence now, which errs on the side of waiting. An error means the silence is not confirmed.
//
// A confirmed silence stands until the hub observes a renewal: the agent did miss that much, and
// an agent that missed fenceAfter has fenced its primaries at their epoch for good (it unfences
// only at a higher epoch from the hub), so a later decision needs no new read. That keeps the
// failover gates of the thousands of databases on lost clusters from reading the same Leases
// again and again, each read waiting behind the hub's own writes in its API server flow.
func (o *Observer) ConfirmedSilentFor(ctx context.Context, cluster string, over time.Duration) (time.Duration, error) {
	o.mu.Lock()
	silent, since := o.silentLocked(cluster)
	c, ok := o.confirmed[cluster]
	o.mu.Unlock()
	if silent < over || o.read == nil || (ok && c.since.Equal(since) && c.silent >= over) {
		return silent, nil
	}
	renewTime, found, err := o.read(ctx, cluster)
	if err != nil {
		silenceChecks.WithLabelValues(checkError).Inc()
		return 0, fmt.Errorf("confirm the silence of cluster %s with a read of its agent's Lease: %w", cluster, err)
	}
	o.mu.Lock()
	prev, seen := o.seen[cluster]
	renewed := found && (!seen || !prev.renewTime.Equal(renewTime))
	if !renewed {
		// Confirmed: no renewal after the observation the silence counts from now (the watch may
		// have delivered a newer one while the read was out; then this confirms that one).
		silent, since = o.silentLocked(cluster)
		o.confirmed[cluster] = confirmation{since: since, silent: silent}
	}
	o.mu.Unlock()
	if renewed {
		silenceChecks.WithLabelValues(checkRenewed).Inc()
		o.Observe(cluster, renewTime)
	} else {
		silenceChecks.WithLabelValues(checkSilent).Inc()
	}
	silent, _ = o.SilentFor(cluster)
	return silent, nil
}

// Forget drops a cluster that left.
func (o *Observer) Forget(cluster string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, cluster)
	delete(o.joined, cluster)
	delete(o.confirmed, cluster)
}
