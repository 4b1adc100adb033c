package databasecluster

import (
	"slices"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
)

// replication is what the hub tells the shares of a postgres database about one another: the
// primary's address as its cluster exposes it, for the standbys of every other cluster, and the
// pods of the other clusters' shares, for which the primary keeps replication slots.
type replication struct {
	primaryEndpoint string
	// primaryCluster is the cluster whose share gets standbys.
	primaryCluster string
	standbys       []string
}

// replicationOf reads it from the status: the endpoint is the one the primary share's agent
// reported at the current epoch, else the promoted pod's address (promotedPodAddress), else none
// (a standby keeps following what it followed); the standbys are <db>-<ordinal> of every other placed or kept share.
func replicationOf(s *scope) replication {
	dbc := s.dbc
	var r replication
	if dbc.Spec.Engine != dbfleetv1alpha1.EnginePostgres || dbc.Status.Primary == nil {
		return r
	}
	r.primaryCluster = dbc.Status.Primary.Cluster
	if mdb := s.memberDBs[r.primaryCluster]; mdb != nil {
		if mdb.Spec.Role == dbfleetv1alpha1.RolePrimary && mdb.Status.Epoch == dbc.Status.Primary.Epoch && mdb.Status.Endpoints != nil {
			r.primaryEndpoint = mdb.Status.Endpoints.ReadWrite
		}
		if r.primaryEndpoint == "" {
			// Also in the reconcile that promotes it, whose share (read before) is still a standby's.
			r.primaryEndpoint = shareOf(mdb).promotedPodAddress(primaryPod(dbc))
		}
	}
	add := func(cluster string, o dbfleetv1alpha1.OrdinalRange) {
		if cluster == r.primaryCluster {
			return
		}
		for i := range o.Count {
			r.standbys = append(r.standbys, contract.PodName(dbc.Name, o.Start+i))
		}
	}
	for _, p := range dbc.Status.Placements {
		add(p.Cluster, p.Ordinals)
	}
	for _, e := range dbc.Status.Evictions {
		add(e.Cluster, e.Ordinals)
	}
	slices.Sort(r.standbys)
	r.standbys = slices.Compact(r.standbys)
	return r
}

// apply writes it into one share's desired spec.
func (r replication) apply(mdb *dbfleetv1alpha1.MemberDatabase, cluster string) {
	mdb.Spec.PrimaryEndpoint = r.primaryEndpoint
	if cluster == r.primaryCluster && mdb.Spec.Role == dbfleetv1alpha1.RolePrimary {
		mdb.Spec.Standbys = r.standbys
	}
}

// endpointsOf is the DatabaseCluster's status.endpoints: the primary's address and every
// placed share's standbys.
func endpointsOf(s *scope, r replication) *dbfleetv1alpha1.DatabaseEndpoints {
	if s.dbc.Spec.Engine != dbfleetv1alpha1.EnginePostgres {
		return nil
	}
	out := &dbfleetv1alpha1.DatabaseEndpoints{ReadWrite: r.primaryEndpoint}
	for _, p := range s.dbc.Status.Placements {
		if mdb := s.memberDBs[p.Cluster]; mdb != nil && mdb.Status.Endpoints != nil {
			out.ReadOnly = append(out.ReadOnly, mdb.Status.Endpoints.ReadOnly...)
		}
	}
	slices.Sort(out.ReadOnly)
	out.ReadOnly = slices.Compact(out.ReadOnly)
	if out.ReadWrite == "" && len(out.ReadOnly) == 0 {
		return nil
	}
	return out
}
