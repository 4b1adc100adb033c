package member

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
)

// renewWorkers is how many primary Leases the renewer writes at once. The writes wait on the
// member API server, not on CPU, and the member client's rate limit bounds them anyway; a few at
// once keep a hundred primaries' Leases within a fraction of a second of each renewal.
const renewWorkers = 8

// renewer carries each successful hub renewal into the primary Lease of every live primary share
// as soon as it succeeds, apart from the reconciles. A share's Lease used to be rewritten only by
// the share's next pass, scheduled from the renewal before: on a busy machine (workers taken by
// other shares, a CPU the agent shares) the pass came late, the Lease arrived with about
// fenceSafety to spare, and healthy primaries fenced themselves. The renewer waits for nothing
// but the renewal and the member API server. What it may write, and why that is safe beside the
// passes, is primaryLease's doc.
type renewer struct {
	r *Reconciler
}

// Start runs until ctx ends. It implements manager.Runnable.
func (w renewer) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("primary-lease-renewer")
	ctx = ctrl.LoggerInto(ctx, log)
	for next := w.r.Guard.NextRenewal(); ; {
		select {
		case <-ctx.Done():
			return nil
		case <-next:
		}
		// Taken before the round: a renewal during it brings another round at once, and
		// renewals that come faster than a round are carried together.
		next = w.r.Guard.NextRenewal()
		if failed, err := w.r.renewLeases(ctx); failed > 0 {
			log.Error(err, "Renewing primary Leases failed; their shares' passes retry and judge them", "failed", failed)
		}
	}
}

// NeedLeaderElection is false: the agent runs one replica per member cluster.
func (renewer) NeedLeaderElection() bool { return false }

// renewLeases renews the Lease of every share that renewLive allows, renewWorkers at a time. It
// returns how many renewals failed, and the first failure (one line for a member API server that
// is down, not one a primary).
func (r *Reconciler) renewLeases(ctx context.Context) (int, error) {
	shares := r.shares.all()
	work := make(chan *shareState)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int
		first  error
	)
	for range min(renewWorkers, len(shares)) {
		wg.Go(func() {
			for st := range work {
				if err := r.renewLive(ctx, &st.lease); err != nil {
					mu.Lock()
					if failed++; first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, st := range shares {
		work <- st
	}
	close(work)
	wg.Wait()
	return failed, first
}

// renewLive carries the last hub renewal into the share's Lease if its last pass found it a live
// primary (l.live) and nothing since says otherwise: the agent has stayed fresh (the renewal
// started before l.until, and the deadline is still ahead), the Lease has not certainly lapsed,
// and the hub's MemberDatabase still asks for a primary at that epoch. Anything else waits for
// the share's pass, which judges it.
func (r *Reconciler) renewLive(ctx context.Context, l *primaryLease) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.live
	if t == nil {
		return nil
	}
	renewed := r.Guard.LastRenewStart()
	if !renewed.Before(l.until) || !r.Guard.Fresh() {
		return nil
	}
	if lapse, ok := primaryLeaseLapse(l.tried, t.epoch, r.Guard.FenceAfter()); ok && !r.Guard.Now().Before(lapse) {
		return nil
	}
	if !stillPrimary(ctx, t) {
		return nil
	}
	l.until = renewed.Add(r.Guard.FenceAfter())
	if err := r.carry(ctx, l); err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("Renewing a primary Lease failed", "namespace", t.namespace, "database", t.db, "err", err.Error())
		return fmt.Errorf("primary lease of %s/%s: %w", t.namespace, t.db, err)
	}
	return nil
}

// stillPrimary says whether the agent's cache of the hub still has the share as a primary at the
// epoch its last pass saw, and not being deleted: a demotion or a new epoch waiting for the
// share's pass stops the renewals now (the Lease then runs out on its own unless the pass renews
// it), rather than extend a Lease the hub has moved on from.
func stillPrimary(ctx context.Context, t *liveLease) bool {
	mdb := &dbfleetv1alpha1.MemberDatabase{}
	if err := t.hub.Get(ctx, t.mdb, mdb); err != nil {
		return false
	}
	return mdb.DeletionTimestamp.IsZero() && mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && mdb.Spec.Epoch == t.epoch
}
