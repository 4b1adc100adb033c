package databasecluster

import (
	"fmt"
	"slices"
	"strings"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// synchronousSpec is spec.postgres.synchronous of a postgres database, with its default; nil
// when replication is asynchronous.
func synchronousSpec(dbc *dbfleetv1alpha1.DatabaseCluster) *dbfleetv1alpha1.SynchronousReplication {
	pg := dbc.Spec.Postgres
	if dbc.Spec.Engine != dbfleetv1alpha1.EnginePostgres || pg == nil || pg.Synchronous == nil || pg.Synchronous.Number <= 0 {
		return nil
	}
	out := *pg.Synchronous
	if out.DataDurability == "" {
		out.DataDurability = dbfleetv1alpha1.DataDurabilityRequired
	}
	return &out
}

// required says whether a failover must keep every acknowledged commit.
func required(dbc *dbfleetv1alpha1.DatabaseCluster) bool {
	sync := synchronousSpec(dbc)
	return sync != nil && sync.DataDurability == dbfleetv1alpha1.DataDurabilityRequired
}

// primaryReport is the synchronous replication the primary's instance last reported at the
// current epoch (nil: none).
func primaryReport(s *scope) *dbfleetv1alpha1.InstanceSynchronous {
	p := s.dbc.Status.Primary
	if p == nil {
		return nil
	}
	mdb := s.memberDBs[p.Cluster]
	if mdb == nil || mdb.Status.Epoch != p.Epoch {
		return nil
	}
	for _, in := range mdb.Status.Instances {
		if in.Role == dbfleetv1alpha1.InstanceRunningPrimary && in.Synchronous != nil {
			return in.Synchronous
		}
	}
	return nil
}

// recordSynchronous keeps status.synchronous, the quorum of the current primary epoch, a superset
// of the standbys the primary may count: those it reported listing, those the hub asks it to list
// now (spec.standbys of its share, as written and as about to be written). A standby leaves once
// it is in none of them. The number is the lowest of the one asked for and the one the primary
// reported in effect, so the quorum never counts on more confirmations than a commit had.
func recordSynchronous(s *scope) {
	dbc := s.dbc
	sync := synchronousSpec(dbc)
	p := dbc.Status.Primary
	if sync == nil || p == nil || p.Cluster == "" {
		dbc.Status.Synchronous = nil
		return
	}
	rec := &dbfleetv1alpha1.SynchronousStatus{Epoch: p.Epoch, Number: sync.Number, Durability: sync.DataDurability}
	names := slices.Clone(replicationOf(s).standbys)
	if mdb := s.memberDBs[p.Cluster]; mdb != nil && mdb.Spec.Epoch == p.Epoch && mdb.Spec.Role == dbfleetv1alpha1.RolePrimary {
		names = append(names, mdb.Spec.Standbys...)
	}
	if report := primaryReport(s); report != nil {
		names = append(names, report.Standbys...)
		rec.Number = min(rec.Number, report.Number)
		rec.Synchronous = slices.Sorted(slices.Values(report.Synchronous))
	}
	pod := primaryPod(dbc)
	names = slices.DeleteFunc(names, func(n string) bool { return n == pod })
	slices.Sort(names)
	rec.Standbys = slices.Compact(names)
	if len(rec.Synchronous) == 0 {
		rec.Synchronous = nil
	}
	if len(rec.Standbys) == 0 {
		rec.Standbys = nil
	}
	dbc.Status.Synchronous = rec
}

// quorumOf is the quorum a failover off the current primary must respect: status.synchronous
// when it describes the current epoch, else what the hub asked the primary for.
func quorumOf(s *scope) (standbys []string, number int32) {
	dbc := s.dbc
	if rec := dbc.Status.Synchronous; rec != nil && dbc.Status.Primary != nil && rec.Epoch == dbc.Status.Primary.Epoch {
		return rec.Standbys, rec.Number
	}
	return replicationOf(s).standbys, synchronousSpec(dbc).Number
}

// synchronousProgress is scheduling's Progress when durability is required: by cluster, the
// furthest progress of the share's instances that are in the quorum (any of them may become the
// primary pod: choosePromotedPod). Shares without one count as having nothing, so the placement
// engine picks, among the shares that may take the primary, the furthest.
func synchronousProgress(s *scope) map[string]placement.WALProgress {
	quorum, _ := quorumOf(s)
	inQuorum := func(pod string) bool { return slices.Contains(quorum, pod) }
	out := map[string]placement.WALProgress{}
	for _, pl := range s.dbc.Status.Placements {
		if p, ok := shareProgress(s, pl, inQuorum); ok {
			out[pl.Cluster] = p
		}
	}
	return out
}

// synchronousGate says why a failover to pod in cluster to would lose acknowledged commits
// under dataDurability required, or "" when it would not. Every commit the old primary
// acknowledged is on at least W of the quorum's N standbys; so with R of them read in clusters
// that are Ready, R + W > N means one of those R has every such commit, and the most advanced of
// them (by received LSN) does. The new primary must be that one, or level with it.
func synchronousGate(s *scope, to, pod string) string {
	quorum, w := quorumOf(s)
	n := int32(len(quorum))
	type reading struct {
		pod      string
		progress placement.WALProgress
	}
	var read []reading
	var unread []string
	for _, pod := range quorum {
		found := false
		for cluster, mdb := range s.memberDBs {
			if !scheduling.ClusterReady(s.members[cluster]) {
				continue
			}
			if p, ok := shareOf(mdb).progress(pod); ok {
				read, found = append(read, reading{pod, p}), true
				break
			}
		}
		if !found {
			unread = append(unread, pod)
		}
	}
	r := int32(len(read))
	// R = 0 never qualifies, even when W > N (a primary asked for more standbys than it had).
	if n == 0 || r == 0 || r+w <= n {
		return fmt.Sprintf("dataDurability is required: every acknowledged commit is on %d of the synchronous standbys [%s], so more than %d of them must be read to know which has them all, but %d can be (not: [%s]); waiting for them rather than lose acknowledged writes",
			w, strings.Join(quorum, ", "), n-w, r, strings.Join(unread, ", "))
	}
	best := read[0]
	for _, rd := range read[1:] {
		if rd.progress.Compare(best.progress) > 0 {
			best = rd
		}
	}
	target, ok := s.shareOn(to).progress(pod)
	if !ok || !slices.Contains(quorum, pod) || target.Compare(best.progress) < 0 {
		return fmt.Sprintf("dataDurability is required: of the synchronous standbys [%s], %s is the most advanced (received %s), and it is not the instance that %s would promote (%s): waiting rather than lose acknowledged writes",
			strings.Join(quorum, ", "), best.pod, contract.LSN(best.progress.Received).String(), to, pod)
	}
	return ""
}
