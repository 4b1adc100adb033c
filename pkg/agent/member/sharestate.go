package member

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// shareKey names a share: the member cluster it runs in and its MemberDatabase on the hub.
type shareKey struct {
	cluster string
	types.NamespacedName
}

// shareState is what the agent remembers of one share between passes. It is forgotten with the
// share (Reconciler.forget), so a database re-created under the same name starts with nothing of
// its predecessor's: above all not its lapse, which would fence it at once at epoch 1.
//
// A record is read and written only by the reconcile of its share, and controller-runtime never
// reconciles one request in two workers at once (ownwrites.Tracker relies on the same), so its
// fields need no lock; shareStates' mutex guards which records exist. The one exception is lease,
// which the renewer shares with the reconcile under lease's own lock (see primaryLease).
type shareState struct {
	// lastPass is what the last full pass of the share, a live primary, saw and left (nil:
	// none to go on), so that the passes which only carry hub renewals into the primary Lease
	// need not re-apply every object.
	lastPass *passRecord
	// fenceCounted is the epoch at which the share's fence was last counted: a pass right after
	// the fence may still read the StatefulSet from a cache without the fenced epoch, and fence
	// again; the metric counts that fence once.
	fenceCounted int64
	// lease is the share's primary Lease as this agent writes it, from its passes and from the
	// renewer.
	lease primaryLease
	// lapsed is the epoch at which the agent judged the share's primary Lease lapsed while it
	// could not renew it (judgeLeaseLapse; 0: never): the share is fenced at that epoch once the
	// member answers again.
	lapsed int64
	// primary is whether the share's primary instance serves, while it is a live primary here
	// (watchPrimary).
	primary primaryWatch
	// unreportedSince is when the agent first applied the share, while it has not reported it
	// yet (zero: reported, or not applied): see holdFirstReport.
	unreportedSince time.Time
}

// passRecord is what a full pass of a live primary share saw and left.
type passRecord struct {
	mdbResourceVersion, stsResourceVersion string
	at                                     time.Time
}

// leaseTry is a renewal the agent tried to write into a share's primary Lease at an epoch.
type leaseTry struct {
	epoch   int64
	renewed time.Time
}

// shareStates holds one shareState per share.
type shareStates struct {
	mu     sync.Mutex
	states map[shareKey]*shareState
}

// get returns the share's record, a new one if the agent remembers nothing of it.
func (s *shareStates) get(key shareKey) *shareState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[key]
	if !ok {
		if s.states == nil {
			s.states = map[shareKey]*shareState{}
		}
		st = &shareState{}
		s.states[key] = st
	}
	return st
}

// forget drops the share's record, and stops the renewer's writes to its primary Lease first:
// the share is going (its Lease deleted next) or gone, and a renewal landing after its cleanup
// would leave a Lease behind for a re-created database to meet.
func (s *shareStates) forget(key shareKey) {
	s.mu.Lock()
	st := s.states[key]
	delete(s.states, key)
	s.mu.Unlock()
	if st != nil {
		st.lease.stop()
	}
}

// all is every share's record. The renewer takes it and decides under each record's lease lock,
// which it must not take here: a Lease write holds it, and this lock stops every share's pass.
func (s *shareStates) all() []*shareState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*shareState, 0, len(s.states))
	for _, st := range s.states {
		out = append(out, st)
	}
	return out
}
