package databasecluster

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// ReasonVersionRolled is the Event raised when a version roll has reached every share.
const ReasonVersionRolled = "VersionRolled"

// rollShare is one share as the version roll sees it.
type rollShare struct {
	cluster string
	// mdb is the share's MemberDatabase as last read; nil while it is not written yet (a new
	// share starts at the wanted version: it clones from the primary, whatever that runs).
	mdb *dbfleetv1alpha1.MemberDatabase
	// reachable says the cluster is Ready, so what its agent reports is trusted.
	reachable bool
}

// asked is the version the share was last written with ("" for a new share).
func (s rollShare) asked() string {
	if s.mdb == nil {
		return ""
	}
	return s.mdb.Spec.Database.Version
}

// rollPlan is what one reconcile does of a version roll.
type rollPlan struct {
	// hold are the shares, by cluster, that keep the version and image they were last written
	// with; every other share is written with spec.version and spec.image.
	hold map[string]bool
	// switchoverTo, when set, asks scheduling to hand the primary to one of these clusters: the
	// shares that already run the new version.
	switchoverTo []string
	// step, when set, says a version roll is under way and what it does now: the Progressing
	// condition's message.
	step string
}

// apply gives t, the DatabaseTemplate written into the share on cluster (a copy of the
// DatabaseCluster's), the version and image that share was last written with (existing) when the
// plan holds it; every other change of the template reaches it.
func (p rollPlan) apply(t *dbfleetv1alpha1.DatabaseTemplate, cluster string, existing *dbfleetv1alpha1.MemberDatabase) {
	if p.hold[cluster] && existing != nil {
		t.Version, t.Image = existing.Spec.Database.Version, existing.Spec.Database.Image
	}
}

// keep holds the share on cluster at its version.
func (p *rollPlan) keep(cluster string) {
	if p.hold == nil {
		p.hold = map[string]bool{}
	}
	p.hold[cluster] = true
}

// planRoll decides how a change of spec.version reaches the shares of a postgres database, from
// what the shares were last written with and what they report (status.version, Available), so a
// hub that restarts mid-roll picks it up where it was:
//
//  1. the standbys' shares one at a time, in name order, each only while the primary is
//     Available at its epoch, the next only once the previous reports the new version and is
//     Available; the primary's share keeps the old version;
//  2. then a switchover of the primary to one of them (switchoverTo), through the same
//     demote-then-promote protocol as a change of spec.primary.preferredClusters;
//  3. once the new primary is Available at its new epoch, the former primary's share, which is
//     by then a standby's share like those of step 1.
//
// A failover during a roll just changes which share is the primary's: the roll goes on from
// there (a primary that landed on an old share is switched over again). A database on one share
// updates in place: the StatefulSet replaces its pods one at a time, the highest ordinal first.
// A change of spec.image alone, or of any other engine's version, goes to every share at once.
// Evicted shares, which are leaving, keep the version they run.
func planRoll(want *dbfleetv1alpha1.DatabaseTemplate, primary *dbfleetv1alpha1.PrimaryStatus, placed, evicting []rollShare) rollPlan {
	var plan rollPlan
	if want.Engine != dbfleetv1alpha1.EnginePostgres {
		return plan
	}
	v := want.Version
	for _, s := range evicting {
		if s.mdb != nil && s.asked() != v {
			plan.keep(s.cluster)
		}
	}
	if !slices.ContainsFunc(placed, func(s rollShare) bool { return s.rolling(v) }) {
		return plan
	}
	if len(placed) == 1 {
		plan.step = fmt.Sprintf("updating the only share, on %s, to %s in place: its StatefulSet replaces the pods one at a time, the highest ordinal first "+
			"(no switchover: no other share can take the primary)", placed[0].cluster, v)
		return plan
	}
	prim, standbys, old := splitPrimary(placed, primary, v)
	for _, s := range old {
		plan.keep(s.cluster)
	}
	if prim == nil {
		plan.step = fmt.Sprintf("rolling to %s: waiting for a primary to be placed", v)
		return plan
	}
	plan.nextStep(v, prim, primary.Epoch, standbys, versionsOf(old))
	return plan
}

// onVersion says the share was last written with version v (a share not written yet starts on
// it).
func (s rollShare) onVersion(v string) bool { return s.mdb == nil || s.asked() == v }

// runs says the share reports that it runs version v, as written.
func (s rollShare) runs(v string) bool {
	return s.mdb != nil && s.reachable && s.onVersion(v) && s.mdb.Status.Version == v && s.mdb.Status.ObservedGeneration >= s.mdb.Generation
}

// settledOn says the share runs version v and is Available.
func (s rollShare) settledOn(v string) bool {
	return s.runs(v) && meta.IsStatusConditionTrue(s.mdb.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
}

// rolling says the share is not on version v yet: written with another, or reporting another.
func (s rollShare) rolling(v string) bool {
	return s.mdb != nil && (!s.onVersion(v) || s.mdb.Status.Version != "" && s.mdb.Status.Version != v)
}

// splitPrimary finds, among the placed shares, the primary's (nil when none is placed), the
// others (standbys), and those still written with another version than v (old).
func splitPrimary(placed []rollShare, primary *dbfleetv1alpha1.PrimaryStatus, v string) (prim *rollShare, standbys, old []rollShare) {
	for i := range placed {
		s := placed[i]
		if primary != nil && s.cluster == primary.Cluster {
			prim = &placed[i]
		} else {
			standbys = append(standbys, s)
		}
		if !s.onVersion(v) {
			old = append(old, s)
		}
	}
	return prim, standbys, old
}

// nextStep is the roll's step with the primary's share prim at epoch and the standbys' shares
// as they are; from names the versions being left.
func (p *rollPlan) nextStep(v string, prim *rollShare, epoch int64, standbys []rollShare, from string) {
	// The primary's share was told to step down for a switchover (a higher epoch, as a replica):
	// the hand-over goes on to any share that has reported the new version, even while it is not
	// Available for a moment or has not yet seen its latest spec (the hub writes the shares'
	// endpoints as the old primary stops), or the move would be dropped and the old primary
	// promoted again.
	demoting := prim.mdb != nil && prim.mdb.Spec.Epoch > epoch && prim.mdb.Spec.Role == dbfleetv1alpha1.RoleReplica
	var waiting, next *rollShare
	done, targets := 0, []string{}
	for i := range standbys {
		s := standbys[i]
		switch {
		case !s.onVersion(v):
			if next == nil {
				next = &standbys[i]
			}
		case s.settledOn(v) || demoting && s.mdb != nil && s.mdb.Status.Version == v:
			done++
			targets = append(targets, s.cluster)
		case waiting == nil:
			waiting = &standbys[i]
		}
	}
	switch {
	case waiting != nil && prim.onVersion(v):
		p.step = fmt.Sprintf("rolling %sto %s: the primary runs %s on %s at epoch %d; waiting for the share on %s to run %s and be Available (%d of %d standby shares done)",
			from, v, v, prim.cluster, epoch, waiting.cluster, v, done, len(standbys))
	case waiting != nil:
		p.step = fmt.Sprintf("rolling %sto %s, standbys first: waiting for the share on %s to run %s and be Available (%d of %d standby shares done); "+
			"the primary's share on %s stays on %s until the switchover", from, v, waiting.cluster, v, done, len(standbys), prim.cluster, prim.asked())
	case next != nil && !primaryServing(*prim, epoch):
		p.step = fmt.Sprintf("rolling %sto %s: waiting for the primary on %s to be Available at epoch %d before updating the share on %s",
			from, v, prim.cluster, epoch, next.cluster)
	case next != nil && prim.onVersion(v):
		// The primary already runs the new version (it was switched over, or failed over to a
		// share already updated): the rest are standbys, updated like the first ones.
		delete(p.hold, next.cluster)
		p.step = fmt.Sprintf("rolling %sto %s: the primary runs %s on %s at epoch %d; updating the share on %s (%d of %d standby shares done)",
			from, v, v, prim.cluster, epoch, next.cluster, done, len(standbys))
	case next != nil:
		delete(p.hold, next.cluster)
		p.step = fmt.Sprintf("rolling %sto %s, standbys first: updating the share on %s (%d of %d standby shares done); the primary's share on %s stays on %s until the switchover",
			from, v, next.cluster, done, len(standbys), prim.cluster, prim.asked())
	case !prim.onVersion(v):
		p.switchoverTo = targets
		p.step = fmt.Sprintf("rolling %sto %s: every standby share runs %s; switching the primary over from %s to one of them (%s), then updating its share",
			from, v, v, prim.cluster, listSome(targets))
	default:
		p.step = fmt.Sprintf("rolling to %s: waiting for the primary's share on %s to run %s and be Available", v, prim.cluster, v)
	}
}

// primaryServing says the primary's share reports its primary Available at the current epoch.
func primaryServing(s rollShare, epoch int64) bool {
	m := s.mdb
	return m != nil && s.reachable && m.Spec.Role == dbfleetv1alpha1.RolePrimary && m.Spec.Epoch == epoch && m.Status.Epoch >= epoch &&
		m.Status.ObservedGeneration >= m.Generation && meta.IsStatusConditionTrue(m.Status.Conditions, dbfleetv1alpha1.ConditionAvailable)
}

// versionsOf names the versions the old shares were written with, "16.4 " or "16.4, 16.5 ",
// for "rolling <from>to <version>".
func versionsOf(old []rollShare) string {
	var vs []string
	for _, s := range old {
		if v := s.asked(); v != "" && !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return ""
	}
	return "from " + strings.Join(vs, ", ") + " "
}

// planRollOf is planRoll over the scope's DatabaseCluster and MemberDatabases as they are now.
func planRollOf(s *scope) rollPlan {
	dbc := s.dbc
	rollShareOn := func(cluster string) rollShare {
		return rollShare{cluster: cluster, mdb: s.memberDBs[cluster], reachable: scheduling.ClusterReady(s.members[cluster])}
	}
	placed := make([]rollShare, 0, len(dbc.Status.Placements))
	for _, p := range dbc.Status.Placements {
		placed = append(placed, rollShareOn(p.Cluster))
	}
	var evicting []rollShare
	for _, e := range dbc.Status.Evictions {
		evicting = append(evicting, rollShareOn(e.Cluster))
	}
	return planRoll(&dbc.Spec.DatabaseTemplate, dbc.Status.Primary, placed, evicting)
}

// recordRoll raises the Events of a version roll from the Progressing condition as the reconcile
// found it (before) and left it: one at each new step, and VersionRolled once the roll is over.
// It only reports: what the roll does is decided from the shares (planRoll), never from here.
func (r *Reconciler) recordRoll(dbc *dbfleetv1alpha1.DatabaseCluster, before *metav1.Condition) {
	after := meta.FindStatusCondition(dbc.Status.Conditions, dbfleetv1alpha1.ConditionProgressing)
	if after == nil {
		return
	}
	wasRolling := before != nil && before.Reason == dbfleetv1alpha1.ReasonRollingVersion
	switch {
	case after.Reason == dbfleetv1alpha1.ReasonRollingVersion && (!wasRolling || before.Message != after.Message):
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, dbfleetv1alpha1.ReasonRollingVersion, "RollVersion", "%s", truncate(after.Message))
	case after.Reason != dbfleetv1alpha1.ReasonRollingVersion && wasRolling:
		primary := "none"
		if p := dbc.Status.Primary; p != nil && p.Cluster != "" {
			primary = p.Cluster
		}
		r.Recorder.Eventf(dbc, nil, corev1.EventTypeNormal, ReasonVersionRolled, "RollVersion",
			"every share runs %s; the primary is on %s", dbc.Spec.Version, primary)
	}
}
