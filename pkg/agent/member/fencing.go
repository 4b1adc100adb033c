package member

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// fenceState is where a share's primary stands in one pass.
type fenceState struct {
	// fencedAt is the epoch at which the share's primary is fenced, 0 when it is not.
	fencedAt int64
	// fenced says the share holds the primary and it is fenced.
	fenced bool
	// now: this pass fences it. lapsedHere: the agent judged its primary Lease lapsed at this
	// epoch in an earlier pass. failsafe: it would have fenced, but the primary takes writes on
	// its failsafe (onFailsafe).
	now, lapsedHere, failsafe bool
}

// failsafeRecheck is how soon a primary the agent did not fence because it is on its failsafe
// is looked at again.
const failsafeRecheck = time.Second

// judgeFence reads, from the StatefulSet the member runs, the epoch it runs and the one its
// primary was fenced at, and fences a primary share whose agent has no fresh hub renewal or whose
// primary Lease lapsed at this epoch. A fence from an epoch below the share's is spent.
func (r *Reconciler) judgeFence(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState) (int64, fenceState, error) {
	running, fencedAt, err := currentEpochs(ctx, member, mdb)
	if err != nil || running > mdb.Spec.Epoch {
		return running, fenceState{}, err
	}
	if fencedAt < mdb.Spec.Epoch {
		fencedAt = 0 // the hub has since handed out a higher epoch: the old fence is spent
	}
	primary := mdb.Spec.Role == dbfleetv1alpha1.RolePrimary
	f := fenceState{fencedAt: fencedAt, lapsedHere: share.lapsed == mdb.Spec.Epoch}
	f.now = primary && fencedAt == 0 && r.Guard != nil && (!r.Guard.Fresh() || f.lapsedHere)
	if f.now && !f.lapsedHere && r.onFailsafe(ctx, member, mdb) {
		f.now, f.failsafe = false, true
	}
	if f.now {
		f.fencedAt = mdb.Spec.Epoch
		log := ctrl.LoggerFrom(ctx)
		if f.lapsedHere {
			log.Info("Fencing primary: its primary Lease lapsed unrenewed (the member API server was unreachable, or its primary pod was lost)", "epoch", f.fencedAt)
		} else {
			log.Info("Fencing primary: no successful hub renewal within fenceAfter", "epoch", f.fencedAt, "deadline", r.Guard.Deadline())
		}
	}
	f.fenced = primary && f.fencedAt > 0
	return running, f, nil
}

// settleFence runs after the share's objects were applied. A live primary whose Lease renewal
// failed is fenced once the Lease has certainly lapsed (judgeLeaseLapse), and the Fenced message
// says why; a fence this pass wrote is counted once. It returns when to judge the lapse again.
func (r *Reconciler) settleFence(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, f *fenceState, pass *passResult) time.Duration {
	primary := mdb.Spec.Role == dbfleetv1alpha1.RolePrimary
	var lapseWait time.Duration
	if primary && !f.fenced && pass.primaryLost && r.Guard != nil {
		// Its primary pod was lost: fenced once its Lease has certainly run out, whatever its
		// failsafe (the agent could not read the instance, or it did not serve).
		lapse := r.lostLapse(share, mdb.Spec.Epoch)
		if wait := lapse.Sub(r.now()); wait > 0 {
			lapseWait = wait
		} else {
			share.lapsed = mdb.Spec.Epoch
			f.fenced, f.fencedAt = true, mdb.Spec.Epoch
			pass.fenceMessage, pass.fenceReason = lostMessage(mdb.Spec.Epoch, share.primary.why), dbfleetv1alpha1.ReasonPrimaryLost
		}
	} else if primary && !f.fenced && pass.leaseErr != nil && r.Guard != nil {
		if f.failsafe || (r.leaseLapsed(share, mdb.Spec.Epoch, r.now()) && r.onFailsafe(ctx, member, mdb)) {
			// The Lease lapsed, but the primary has not stopped: it hears every standby. Asked
			// before judgeLeaseLapse, which would record the lapse for good.
			lapseWait, f.failsafe = failsafeRecheck, true
		} else {
			var lapsedNow bool
			if lapsedNow, lapseWait = r.judgeLeaseLapse(ctx, share, mdb, pass.leaseErr, r.now()); lapsedNow {
				f.fenced, f.fencedAt = true, mdb.Spec.Epoch
				pass.fenceMessage, pass.fenceReason = lapseMessage(mdb.Spec.Epoch, pass.leaseErr), dbfleetv1alpha1.ReasonPrimaryLeaseLapsed
			}
		}
	} else if f.lapsedHere && f.fenced && pass.primaryLost {
		pass.fenceMessage, pass.fenceReason = lostMessage(mdb.Spec.Epoch, share.primary.why), dbfleetv1alpha1.ReasonPrimaryLost
	} else if f.lapsedHere && f.fenced {
		pass.fenceMessage, pass.fenceReason = lapseMessage(mdb.Spec.Epoch, errors.New("the member API server did not answer")), dbfleetv1alpha1.ReasonPrimaryLeaseLapsed
	}
	if f.now && pass.atEpoch && !pass.replacing && share.fenceCounted != f.fencedAt {
		// Counted once: the StatefulSet now carries the fenced epoch.
		share.fenceCounted = f.fencedAt
		primariesFenced.Inc()
	}
	return lapseWait
}

// currentEpochs reads, from the StatefulSet the member runs, the epoch it was last applied at and
// the epoch its primary was fenced at (zero when none).
func currentEpochs(ctx context.Context, member client.Client, mdb *dbfleetv1alpha1.MemberDatabase) (running, fencedAt int64, err error) {
	sts := &appsv1.StatefulSet{}
	err = member.Get(ctx, client.ObjectKey{Namespace: mdb.Spec.DatabaseRef.Namespace, Name: mdb.Spec.DatabaseRef.Name}, sts)
	if apierrors.IsNotFound(err) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read StatefulSet: %w", err)
	}
	if sts.Labels[specs.LabelManagedBy] != specs.ManagedByAgent {
		return 0, 0, nil // not ours; apply reports the conflict
	}
	running, _ = strconv.ParseInt(sts.Labels[dbfleetv1alpha1.LabelEpoch], 10, 64)
	fencedAt, _ = strconv.ParseInt(sts.Annotations[specs.AnnotationFencedEpoch], 10, 64)
	return running, fencedAt, nil
}
