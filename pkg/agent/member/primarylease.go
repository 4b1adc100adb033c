package member

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/agent/fence"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// fullPassEvery bounds how long a live primary share goes on lease renewals alone: a full pass
// re-applies its Service and PodDisruptionBudgets, which nothing watches for drift.
const fullPassEvery = time.Minute

// renewOnly is the pass of a live primary share whose MemberDatabase and StatefulSet have not
// changed since its last full pass, less than fullPassEvery ago: it keeps the pods' role labels
// and carries the last hub renewal into the primary Lease, and applies nothing. A share re-applied
// its four objects every fenceAfter/5 before, which at 30 primaries was 40 member API requests a
// second for no change. It reports whether it handled the pass.
func (r *Reconciler) renewOnly(ctx context.Context, hub client.Reader, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, cluster string) (ctrl.Result, bool) {
	if r.Guard == nil || mdb.Spec.Role != dbfleetv1alpha1.RolePrimary || !r.Guard.Fresh() || r.instanceManaged(mdb) {
		return ctrl.Result{}, false
	}
	last := share.lastPass
	if last == nil {
		return ctrl.Result{}, false
	}
	if last.mdbResourceVersion != mdb.ResourceVersion || time.Since(last.at) > fullPassEvery {
		return ctrl.Result{}, false
	}
	sts := &appsv1.StatefulSet{}
	if err := member.Get(ctx, client.ObjectKey{Namespace: mdb.Spec.DatabaseRef.Namespace, Name: mdb.Spec.DatabaseRef.Name}, sts); err != nil ||
		sts.ResourceVersion != last.stsResourceVersion {
		return ctrl.Result{}, false
	}
	// A pod that cannot get its image changes nothing of the StatefulSet: the full pass reports it.
	if problems, err := labelPods(ctx, member, mdb, false); err != nil || len(problems) > 0 {
		return ctrl.Result{}, false
	}
	if err := r.renewPrimaryLease(ctx, hub, member, mdb, share, cluster); err != nil {
		return ctrl.Result{}, false
	}
	return ctrl.Result{RequeueAfter: r.nextLook(true)}, true
}

// nextLook schedules the next reconcile of a live primary share. The primary Lease it just
// wrote expires at the fence deadline; the share comes back one heartbeat after the renewal it
// carries (lookAfter: 5 s at the defaults, with 10 s of the Lease left), by when the agent has
// renewed again, and carries the latest renewal into the Lease, so the instance manager always
// sees a Lease with most of fenceAfter left. Without a newer renewal by then, it comes back at
// the deadline itself, to fence. A look every fenceAfter/5 (3 s) made five looks for every three
// renewals: at 10,000 primaries in one bench-scale process, the largest share of its CPU that
// grew with databases at rest; one look per renewal is the least that keeps the Lease fresh.
func (r *Reconciler) nextLook(livePrimary bool) time.Duration {
	if !livePrimary || r.Guard == nil {
		return 0
	}
	return lookAfter(time.Until(r.Guard.Deadline()), r.Guard.FenceAfter(), r.Guard.RenewInterval())
}

// leaseInHand is how much of the primary Lease nextLook keeps left when it rewrites it, at least:
// the instance manager stops writes contract.FenceSafety before the Lease ends, starts its fast
// shutdown a moment before that, and reads the Lease every second or so, and a busy member API
// server can take a second or two. A third of a short fenceAfter (2.7 s of 8 s) was less than
// that, and healthy primaries on real nodes fenced themselves.
const leaseInHand = contract.FenceSafety + 3*time.Second

// lookAfter is nextLook's arithmetic: until is the time left to the fence deadline, renewEvery
// the heartbeat interval (0 when unknown). The Lease is rewritten when keep is left of it: a
// third of fenceAfter, leaseInHand where fenceAfter leaves room for it, and with the heartbeat
// known, as soon as the next renewal can have happened (fenceAfter - renewEvery). Without a newer
// renewal by then, the share comes back at the deadline itself, to fence.
func lookAfter(until, fenceAfter, renewEvery time.Duration) time.Duration {
	keep := max(fenceAfter/3, min(leaseInHand, fenceAfter*2/3))
	if renewEvery > 0 && renewEvery < fenceAfter {
		keep = max(keep, fenceAfter-renewEvery)
	}
	next := until - keep
	if next <= 0 {
		next = until
	}
	return max(next, 100*time.Millisecond)
}

// primaryLease is what the agent knows of one share's primary Lease, and the one part of a
// share's record that two goroutines use: the share's reconcile, on each pass of a live primary,
// and the renewer, right after each successful hub renewal. mu serialises them and is held
// across each write, which is what makes the renewer safe beside the passes:
//
//   - A pass that finds the share no longer a live primary here (it fences it, sees it demoted
//     or at a stale epoch, judges its Lease lapsed, or the share goes) calls stop before it
//     writes any of that. stop takes mu, so it waits out a renewer write in flight, and clears
//     live, so that no renewer write starts after it: the fence label, the fenced-epoch
//     annotation, the release of the Lease and the report that follow are never overtaken by a
//     renewal.
//   - The renewer writes only what the last pass would write again: the start of the last hub
//     renewal, for the holder and epoch that pass found live, and only while the agent has
//     stayed fresh since (until), the Lease has not lapsed (tried), and the hub's MemberDatabase,
//     as the agent's cache has it, still asks for a primary at that epoch. It never changes the
//     holder and never revives a Lease that ran out: that is the pass's to judge.
//   - tried counts the renewals both of them tried, so judgeLeaseLapse judges from every
//     renewal that may have landed.
type primaryLease struct {
	mu sync.Mutex
	// live is the share as its last pass found it, a live primary whose Lease the renewer may
	// renew; nil when it is not one, or no pass has said so since the agent started.
	live *liveLease
	// until is the fence deadline when the share was last found or kept live: a hub renewal that
	// started at or after it came after a time when the agent was not fresh, which the share's
	// pass (the one that fences) must judge before any renewal reaches the Lease again.
	until time.Time
	// tried is the latest renewal this agent tried to write into the Lease (epoch 0: none): a
	// write that seemed to fail may have landed, so this is the latest the Lease can say.
	tried leaseTry
	// written is the latest renewal the member API server took (epoch 0: none).
	written leaseTry
}

// liveLease is what the renewer needs to renew a live primary's Lease between its passes.
type liveLease struct {
	// hub reads the share's MemberDatabase (the agent's cache of the hub); member writes the Lease.
	hub                   client.Reader
	member                client.Client
	mdb                   types.NamespacedName
	namespace, db, holder string
	epoch                 int64
	labels                map[string]string
}

// stop ends the renewer's writes to the share's Lease, waiting for one in flight.
func (l *primaryLease) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live = nil
}

// renewPrimaryLease carries the last successful hub renewal into the share's member-local primary
// Lease, once the agent has renewed at all since it started, and hands the share to the renewer,
// which carries each later renewal into it as soon as it succeeds.
func (r *Reconciler) renewPrimaryLease(ctx context.Context, hub client.Reader, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, cluster string) error {
	l := &share.lease
	r.awaitFreshRenewal(ctx, l, mdb.Spec.Epoch)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live = &liveLease{
		hub: hub, member: member, mdb: client.ObjectKeyFromObject(mdb),
		namespace: mdb.Spec.DatabaseRef.Namespace, db: mdb.Spec.DatabaseRef.Name, holder: contract.Holder(cluster, mdb.Spec.Epoch),
		epoch: mdb.Spec.Epoch, labels: specs.ObjectLabels(mdb),
	}
	// The pass found the agent fresh (judgeFence, renewOnly); past this deadline it has not been,
	// whatever renewals follow, until a pass says so again.
	l.until = r.Guard.Deadline()
	return r.carry(ctx, l)
}

// carry writes the last successful hub renewal into the Lease l.live names, unless the Lease
// already carries it, and records the try. l.mu is held.
func (r *Reconciler) carry(ctx context.Context, l *primaryLease) error {
	t := l.live
	renewed := r.Guard.LastRenewStart()
	if renewed.IsZero() || (l.written.epoch == t.epoch && !renewed.After(l.written.renewed)) {
		return nil // nothing to carry yet, or carried already: by the renewer, or the last pass
	}
	// A write that takes longer than the Lease lasts carries a renewal that has run out by the
	// time it lands: give up then, and leave mu to a pass that may be waiting to fence.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(fence.SecondsDown(r.Guard.FenceAfter()))*time.Second)
	defer cancel()
	err := fence.RenewPrimaryLease(ctx, t.member, t.namespace, t.db, t.holder, renewed, r.Guard.FenceAfter(), t.labels)
	// Recorded unless the write certainly never reached the API server (connection refused): a
	// write that failed otherwise (a timeout) may have landed, and the Lease may say renewed.
	if tried := l.tried; !utilnet.IsConnectionRefused(err) && (tried.epoch != t.epoch || renewed.After(tried.renewed)) {
		l.tried = leaseTry{epoch: t.epoch, renewed: renewed}
	}
	if err == nil {
		l.written = leaseTry{epoch: t.epoch, renewed: renewed}
	}
	return err
}

// awaitFreshRenewal makes the first Lease the share gets at epoch (a promotion, or the first pass
// after the agent started) carry a recent hub renewal. Its instance promotes on that Lease, and
// stops writing fenceSafety before it runs out: a Lease that starts with little of fenceAfter
// left (the renewal it would carry failed or was slow, and the last one that succeeded is nearly
// fenceAfter old) would have the new primary promote, then fence itself before the next renewal
// reaches it; it stays fenced until the hub hands out yet another epoch. So when the last renewal
// is older than firstLeaseMaxAge, the agent asks the heartbeat for one now and waits for it, as
// long again at most (a worker is held meanwhile; promotions are rare). Without one by then, the
// Lease carries the last renewal, which is still the agent's own deadline.
func (r *Reconciler) awaitFreshRenewal(ctx context.Context, l *primaryLease, epoch int64) {
	l.mu.Lock()
	first := l.written.epoch != epoch
	l.mu.Unlock()
	last := r.Guard.LastRenewStart()
	maxAge := firstLeaseMaxAge(r.Guard.FenceAfter(), r.Guard.RenewInterval())
	if !first || last.IsZero() || r.Guard.Now().Sub(last) <= maxAge {
		return
	}
	r.Guard.RequestRenewal()
	wctx, cancel := context.WithTimeout(ctx, maxAge)
	defer cancel()
	if !r.Guard.RenewedAfter(wctx, last) {
		ctrl.LoggerFrom(ctx).Info("No fresh hub renewal for the share's first primary Lease at its epoch; it carries the last one",
			"epoch", epoch, "lastRenewal", last, "waited", maxAge)
	}
}

// firstLeaseMaxAge is how old a renewal the first Lease at an epoch may carry: a heartbeat
// interval, by when the next renewal is due (so an older one means that renewal failed or is
// late), and never more than a third of fenceAfter, so the new primary starts with at least two
// thirds of it.
func firstLeaseMaxAge(fenceAfter, renewEvery time.Duration) time.Duration {
	age := fenceAfter / 3
	if renewEvery > 0 && renewEvery < age {
		age = renewEvery
	}
	return age
}

// primaryLeaseLapse is when the share's primary Lease at epoch has certainly run out for its
// instances, by tried, this agent's record of the renewals it tried: the latest (a write that
// failed but may have landed counts), plus the Lease's duration, plus the clock skew the
// instances allow between their clock and the agent's (they fence fenceSafety before that, on
// their own clock). ok is false when this agent tried no renewal at that epoch: an earlier agent
// process may have, and it cannot tell when.
func primaryLeaseLapse(tried leaseTry, epoch int64, fenceAfter time.Duration) (lapse time.Time, ok bool) {
	if tried.epoch != epoch {
		return time.Time{}, false
	}
	return tried.renewed.Add(time.Duration(fence.SecondsDown(fenceAfter))*time.Second + contract.MaxClockSkew), true
}

// leaseLapsed says the share's primary Lease at epoch has certainly run out by now, by this
// agent's record of the renewals it tried (primaryLeaseLapse); it records nothing.
func (r *Reconciler) leaseLapsed(share *shareState, epoch int64, now time.Time) bool {
	share.lease.mu.Lock()
	tried := share.lease.tried
	share.lease.mu.Unlock()
	lapse, ok := primaryLeaseLapse(tried, epoch, r.Guard.FenceAfter())
	return ok && !now.Before(lapse)
}

// judgeLeaseLapse runs after a live primary share's pass whose primary Lease renewal failed (the
// member API server stopped, say). The instances stop taking writes when the Lease runs out,
// whatever the agent does; but the agent still heartbeats the hub, which therefore sees no
// silence to wait out and would never promote elsewhere. Once the Lease has certainly lapsed,
// the agent fences the share at its epoch for good and says so (Fenced=True,
// PrimaryLeaseLapsed), which lets the hub promote another cluster at once. It returns whether it
// did, and otherwise when to look again.
func (r *Reconciler) judgeLeaseLapse(ctx context.Context, share *shareState, mdb *dbfleetv1alpha1.MemberDatabase, renewErr error, now time.Time) (bool, time.Duration) {
	share.lease.mu.Lock()
	tried := share.lease.tried
	share.lease.mu.Unlock()
	lapse, ok := primaryLeaseLapse(tried, mdb.Spec.Epoch, r.Guard.FenceAfter())
	if !ok {
		return false, 0
	}
	if wait := lapse.Sub(now); wait > 0 {
		return false, wait
	}
	// Fenced from here on at this epoch: the renewer must not reach the Lease again (it would not,
	// for a lapsed Lease, but a fence never rests on one rule alone), and stop waits out a write
	// in flight before the Fenced report goes out.
	share.lease.stop()
	if share.lapsed != mdb.Spec.Epoch {
		share.lapsed = mdb.Spec.Epoch
		ctrl.LoggerFrom(ctx).Error(renewErr, "The primary Lease could not be renewed and has lapsed: the primary has stopped taking writes; fencing the share",
			"epoch", mdb.Spec.Epoch, "lapse", lapse)
	}
	return true, 0
}

// lapseMessage is the Fenced condition's message for a share fenced by judgeLeaseLapse.
func lapseMessage(epoch int64, renewErr error) string {
	return fmt.Sprintf("the agent could not renew the primary Lease at epoch %d (%v) and it has run out: the primary has stopped taking writes; the share stays fenced until the hub hands out a higher epoch", epoch, renewErr)
}
