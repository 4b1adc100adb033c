package databasecluster

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// A planned switchover hands the old primary's final LSN to the target, which promotes only
// once it has replayed past it. Two things can leave the database without a primary there: a
// target that does not stream when the old primary stops never gets that WAL (once it is the
// primary pod it follows nobody), and a move off such a target would wait for a final LSN from
// an instance that never ran as primary. The functions here keep the first from starting and
// undo the second.

// SwitchoverReplayTimeout is how long a switchover's target may stay a standby, without the old
// primary's final LSN in the WAL it received, before the hub moves the primary off it again.
// Once the target is the primary pod nothing sends it more WAL, so past the few report rounds
// this allows for, it never gets there.
const SwitchoverReplayTimeout = 15 * time.Second

// switchoverNotYet says why a planned switchover from cluster from to pod in cluster to must not
// begin yet, or "" when it may, and when to look again. It is asked only of a move the primary's
// cluster does not force (NoPrimary) and that has not begun (demoting).
//   - A primary promoted by the last move is left SwitchoverReplayTimeout to become ready:
//     moving off it at once could hand the token it was given to a target that cannot reach it
//     either, back and forth. Past that, a person may still move it.
//   - A running primary is stopped only for a target that streams from it.
func switchoverNotYet(s *scope, from, to, pod string, now time.Time) (string, time.Duration) {
	p := s.dbc.Status.Primary
	if c := meta.FindStatusCondition(s.dbc.Status.Conditions, dbfleetv1alpha1.ConditionFailoverInProgress); c != nil &&
		c.Status == metav1.ConditionTrue && c.Reason == dbfleetv1alpha1.ReasonPromoted && p.Since != nil {
		if wait := p.Since.Add(SwitchoverReplayTimeout).Sub(now); wait > 0 {
			return fmt.Sprintf("the switchover to %s waits until the primary promoted on %s at epoch %d is ready (for up to %s)",
				to, from, p.Epoch, SwitchoverReplayTimeout), wait
		}
	}
	if !s.shareOn(from).runsPrimary(p.Pod) {
		return "", 0
	}
	return s.shareOn(to).targetNotStreaming(to, pod), 0
}

// stuckSwitchoverTarget says why the primary cannot stay on its cluster, or "" when it can: it
// was promoted by a planned switchover (status.primary.promoteAfterLSN), its instance acts on
// that role yet still runs as a standby, the WAL it holds ends before the LSN it must replay
// past, and SwitchoverReplayTimeout has passed since. The second return is when to look again
// while that time runs.
func stuckSwitchoverTarget(s *scope, now time.Time) (string, time.Duration) {
	p := s.dbc.Status.Primary
	if p == nil || p.PromoteAfterLSN == "" || p.Pod == "" || p.Since == nil {
		return "", 0
	}
	sh := s.shareOn(p.Cluster)
	in := sh.instance(p.Pod)
	if in == nil || sh.mdb.Status.Epoch < p.Epoch || in.Epoch < p.Epoch ||
		in.Role != dbfleetv1alpha1.InstanceRunningStandby || in.PromotedEpoch >= p.Epoch {
		return "", 0
	}
	token, err := contract.ParseLSN(p.PromoteAfterLSN)
	if err != nil {
		return "", 0
	}
	progress, ok := sh.progress(p.Pod)
	if ok && progress.Received >= uint64(token) {
		return "", 0 // it has the WAL and only replays it
	}
	if wait := p.Since.Add(SwitchoverReplayTimeout).Sub(now); wait > 0 {
		return "", wait
	}
	held := "no WAL"
	if ok {
		held = fmt.Sprintf("WAL up to %s", in.ReceivedLSN)
		if in.ReceivedLSN == "" {
			held = fmt.Sprintf("WAL up to %s", in.ReplayedLSN)
		}
	}
	return fmt.Sprintf("its switchover target %s holds %s, short of the final LSN %s it must replay past, %s after it was chosen; nothing sends it more",
		p.Pod, held, p.PromoteAfterLSN, SwitchoverReplayTimeout), 0
}
