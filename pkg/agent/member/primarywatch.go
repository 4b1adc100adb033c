package member

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/specs"
)

// DefaultPrimaryLostAfter is how long a live primary's instance may stop serving, while the
// agent is healthy, before the agent counts its pod lost (the agent's --primary-lost-after).
// With the Lease's run-out and the promotion after it, a lost primary pod is replaced within
// about 30 s at the defaults (docs/failover.md, "A lost primary pod").
const DefaultPrimaryLostAfter = 10 * time.Second

// primaryWatch is what the agent knows of whether a live primary share's primary instance
// serves: a ready primary at the share's epoch, by its /status. It is judged on the agent's
// clock, from the passes' reads.
type primaryWatch struct {
	// epoch, pod and uid say which primary pod the record is about: a new epoch, another primary
	// pod, or the same pod created anew (a rollout, a deletion) starts a new record.
	epoch int64
	pod   string
	uid   types.UID
	// served is the last time the agent read the instance serving; zero while it has not, since
	// the record started. A primary that never served is not counted lost: a promotion or a
	// start may take long, and the share reports it not Available meanwhile.
	served time.Time
	// restarts are the instance's crash restart counts the passes read within the last
	// crashLoopWindow, oldest first.
	restarts []restartCount
	// lost is when the agent counted the pod lost (zero: not), and why, for the Fenced message.
	lost time.Time
	why  string
	// down: the last reading of a pod that served at the epoch said it does not serve now (not
	// busy: a definite answer). The agent holds the Lease's renewals meanwhile (holding).
	down bool
}

// restartCount is the instance's count of postgres crash restarts as one pass read it.
type restartCount struct {
	at    time.Time
	count int
}

// crashLoopRestarts postgres crash restarts within crashLoopWindows times the lost-after count a
// primary pod lost too, serving between them or not: killed over and over, it came back for a
// second at a time, and the passes that happened to read it then kept it from ever counting.
const (
	crashLoopRestarts = 3
	crashLoopWindows  = 3
)

// primaryReading is one pass's reading of the primary pod.
type primaryReading struct {
	pod     string
	uid     types.UID
	serving bool
	// restarts is the instance's count of postgres crash restarts, -1 when it was not read.
	restarts int
	// busy: the instance did not answer but is there (instanceReport.busy): no reading at all.
	busy bool
	// what says what the instance reported when it did not serve, for the messages.
	what string
}

// readPrimary reads, from a pass's instance reports, whether the share's primary pod serves.
func readPrimary(mdb *dbfleetv1alpha1.MemberDatabase, reports []instanceReport) primaryReading {
	pod := contract.PodName(mdb.Spec.DatabaseRef.Name, specs.PrimaryOrdinal(mdb))
	r := primaryReading{pod: pod, what: "its pod is gone", restarts: -1}
	for _, in := range reports {
		if in.Pod != pod {
			continue
		}
		r.uid = in.uid
		r.restarts = in.restarts
		r.busy = in.busy
		// Serving: postgres runs as primary at the epoch and the instance answers, ready or
		// not (a primary waiting for its synchronous standbys, or with a full volume, is not
		// lost: promoting another pod would not bring them back). A primary that fenced itself
		// at this very epoch is no loss either: the hub hands it a higher epoch
		// (repromoteFencedPrimary). A pod still fenced from the epoch before, handed this one
		// and not promoted yet, has not served at it: on a busy machine a re-promoted primary
		// reporting so was counted as served, then lost while it waited to promote.
		r.serving = in.Epoch >= mdb.Spec.Epoch && (in.Role == dbfleetv1alpha1.InstanceRunningPrimary ||
			in.Role == dbfleetv1alpha1.InstanceFenced && in.PromotedEpoch == in.Epoch)
		r.what = fmt.Sprintf("its instance reports role %s, ready %t, epoch %d", in.Role, in.Ready, in.Epoch)
		if in.Message != "" {
			r.what += ": " + in.Message
		}
	}
	return r
}

// observe records a pass's reading at now and says whether the primary pod has just been counted
// lost: it served at the share's epoch, on this very pod object, and has not since, for after.
// After zero never counts one lost.
func (w *primaryWatch) observe(epoch int64, r primaryReading, now time.Time, after time.Duration) bool {
	if w.epoch != epoch || w.pod != r.pod || (r.uid != "" && w.uid != r.uid) {
		if r.uid == "" {
			// No pod (between a deletion and its replacement): nothing to count from.
			*w = primaryWatch{epoch: epoch, pod: r.pod}
			return false
		}
		*w = primaryWatch{epoch: epoch, pod: r.pod, uid: r.uid}
	}
	if !w.lost.IsZero() || after <= 0 {
		return false // counted once; the share is fenced when its Lease has run out
	}
	if r.busy {
		// Neither served nor lost: on a starved machine a healthy primary's /status may not
		// answer for longer than after, and counting that as a loss fenced healthy primaries
		// (bench-busy). A pod whose node or containers are gone does not accept connections.
		return false
	}
	if r.serving {
		w.served = now
	}
	w.down = !r.serving && !w.served.IsZero()
	if w.served.IsZero() {
		return false
	}
	if n := w.crashRestarts(r.restarts, now, crashLoopWindows*after); n >= crashLoopRestarts {
		w.lost = now
		w.why = fmt.Sprintf("the primary pod %s crash-looped: its postgres restarted %d times within %s (%s)", r.pod, n, crashLoopWindows*after, r.what)
		return true
	}
	if r.serving || now.Sub(w.served) < after {
		return false
	}
	w.lost = now
	w.why = fmt.Sprintf("the primary pod %s has not served for %s (%s)", r.pod, now.Sub(w.served).Round(time.Second), r.what)
	return true
}

// crashRestarts records a reading of the restart count (-1: not read) and returns how many
// restarts the readings within window show.
func (w *primaryWatch) crashRestarts(count int, now time.Time, window time.Duration) int {
	if count >= 0 {
		w.restarts = append(w.restarts, restartCount{at: now, count: count})
	}
	for len(w.restarts) > 1 && now.Sub(w.restarts[0].at) > window {
		w.restarts = w.restarts[1:]
	}
	if len(w.restarts) < 2 {
		return 0
	}
	return w.restarts[len(w.restarts)-1].count - w.restarts[0].count
}

// lostAt says the share's primary at epoch was counted lost.
func (w *primaryWatch) lostAt(epoch int64) bool { return w.epoch == epoch && !w.lost.IsZero() }

// holding says the share's primary at epoch served and its last reading says it does not now:
// the agent renews its Lease no more until a reading finds it serving again. Holding costs a
// primary that comes back nothing (the Lease it has runs fenceAfter), and a lost one's Lease then
// runs out counted from the first reading that found it down, not from when it was counted lost:
// at the defaults its replacement came 31 s after its node died when the renewals went on until
// the count.
func (w *primaryWatch) holding(epoch int64) bool { return w.epoch == epoch && w.down }

// watchPrimary runs in a live primary share's pass, after its instances were read: a primary pod
// that stopped serving for PrimaryLostAfter, while this agent is healthy, is counted lost. From
// then on the agent renews the share's primary Lease no more (the renewer stops at once), and
// once the Lease has certainly run out (lostLapse) it fences the share, which the hub takes as
// the old primary's certain stop and promotes the most advanced eligible standby. It returns
// whether the primary is lost.
func (r *Reconciler) watchPrimary(ctx context.Context, mdb *dbfleetv1alpha1.MemberDatabase, share *shareState, reading primaryReading) bool {
	w := &share.primary
	if w.lostAt(mdb.Spec.Epoch) {
		return true
	}
	if !w.observe(mdb.Spec.Epoch, reading, r.now(), r.PrimaryLostAfter) {
		return false
	}
	share.lease.stop()
	primariesLost.Inc()
	ctrl.LoggerFrom(ctx).Info("Primary pod lost: its instance stopped serving while the agent is healthy; renewing its primary Lease no more, the share is fenced once the Lease has run out",
		"pod", reading.pod, "epoch", mdb.Spec.Epoch, "why", w.why)
	r.event(mdb, corev1.EventTypeWarning, dbfleetv1alpha1.ReasonPrimaryLost, "Fence", "%s at epoch %d: the agent renews its primary Lease no more, and fences the share when the Lease has run out", w.why, mdb.Spec.Epoch)
	return true
}

// lostLapse is when the primary Lease of a share whose primary was counted lost at epoch has
// certainly run out for its instances: by the renewals this agent tried (primaryLeaseLapse); for
// an agent that tried none at that epoch, any renewal an earlier agent process wrote came before
// this process counted the pod lost, so the Lease's duration and the skew from then.
func (r *Reconciler) lostLapse(share *shareState, epoch int64) time.Time {
	share.lease.mu.Lock()
	tried := share.lease.tried
	share.lease.mu.Unlock()
	if lapse, ok := primaryLeaseLapse(tried, epoch, r.Guard.FenceAfter()); ok {
		return lapse
	}
	lapse, _ := primaryLeaseLapse(leaseTry{epoch: epoch, renewed: share.primary.lost}, epoch, r.Guard.FenceAfter())
	return lapse
}

// lostMessage is the Fenced condition's message for a share fenced because its primary was lost.
func lostMessage(epoch int64, why string) string {
	return fmt.Sprintf("%s at epoch %d: the agent stopped renewing its primary Lease, which has run out, and fenced the share; the hub promotes the most advanced eligible standby at a higher epoch", why, epoch)
}
