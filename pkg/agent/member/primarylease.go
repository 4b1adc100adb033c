package member

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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
func (r *Reconciler) renewOnly(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, cluster string) (ctrl.Result, bool) {
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
	if err := r.renewPrimaryLease(ctx, member, mdb, share, cluster); err != nil {
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

// renewPrimaryLease carries the last successful hub renewal into the share's member-local primary
// Lease, once the agent has renewed at all since it started.
func (r *Reconciler) renewPrimaryLease(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, cluster string) error {
	renewed := r.Guard.LastRenewStart()
	if renewed.IsZero() {
		return nil
	}
	err := fence.RenewPrimaryLease(ctx, member, mdb.Spec.DatabaseRef.Namespace, mdb.Spec.DatabaseRef.Name,
		contract.Holder(cluster, mdb.Spec.Epoch), renewed, r.Guard.FenceAfter(), specs.ObjectLabels(mdb))
	// Recorded unless the write certainly never reached the API server (connection refused): a
	// write that failed otherwise (a timeout) may have landed, and the Lease may say renewed.
	if tried := share.leaseTried; !utilnet.IsConnectionRefused(err) && (tried.epoch != mdb.Spec.Epoch || renewed.After(tried.renewed)) {
		share.leaseTried = leaseTry{epoch: mdb.Spec.Epoch, renewed: renewed}
	}
	return err
}

// primaryLeaseLapse is when the share's primary Lease at epoch has certainly run out for its
// instances, by this agent's record of the renewals it tried: the latest (a write that failed
// but may have landed counts), plus the Lease's duration, plus the clock skew the instances allow
// between their clock and the agent's (they fence fenceSafety before that, on their own
// clock). ok is false when this agent tried no renewal at that epoch: an earlier agent process
// may have, and it cannot tell when.
func (r *Reconciler) primaryLeaseLapse(share *shareState, epoch int64) (lapse time.Time, ok bool) {
	tried := share.leaseTried
	if tried.epoch != epoch {
		return time.Time{}, false
	}
	return tried.renewed.Add(time.Duration(fence.SecondsDown(r.Guard.FenceAfter()))*time.Second + contract.MaxClockSkew), true
}

// judgeLeaseLapse runs after a live primary share's pass whose primary Lease renewal failed (the
// member API server stopped, say). The instances stop taking writes when the Lease runs out,
// whatever the agent does; but the agent still heartbeats the hub, which therefore sees no
// silence to wait out and would never promote elsewhere. Once the Lease has certainly lapsed,
// the agent fences the share at its epoch for good and says so (Fenced=True,
// PrimaryLeaseLapsed), which lets the hub promote another cluster at once. It returns whether it
// did, and otherwise when to look again.
func (r *Reconciler) judgeLeaseLapse(ctx context.Context, share *shareState, mdb *dbfleetv1alpha1.MemberDatabase, renewErr error, now time.Time) (bool, time.Duration) {
	lapse, ok := r.primaryLeaseLapse(share, mdb.Spec.Epoch)
	if !ok {
		return false, 0
	}
	if wait := lapse.Sub(now); wait > 0 {
		return false, wait
	}
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
