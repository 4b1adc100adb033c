package scheduling

import (
	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/placement"
)

// Progress is, by cluster, the furthest WAL position any instance of the cluster's share reported
// (status.instances[], received then replayed), for placement.Input.Progress: when the primary
// has to move, it goes where the least data is lost. Shares without instance reports (engines
// without the instance manager) are left out, so they all count as equal.
func Progress(shares map[string]*dbfleetv1alpha1.MemberDatabase) map[string]placement.WALProgress {
	var out map[string]placement.WALProgress
	for cluster, mdb := range shares {
		if mdb == nil {
			continue
		}
		var best placement.WALProgress
		found := false
		for _, in := range mdb.Status.Instances {
			p, ok := InstanceProgress(in)
			if ok && (!found || p.Compare(best) > 0) {
				best, found = p, true
			}
		}
		if !found {
			continue
		}
		if out == nil {
			out = map[string]placement.WALProgress{}
		}
		out[cluster] = best
	}
	return out
}

// InstanceProgress is how far in the WAL one instance's report says it is; false when it reported
// no WAL position (not running, or not read). A primary reports its current position as both.
func InstanceProgress(in dbfleetv1alpha1.InstanceStatus) (placement.WALProgress, bool) {
	received, rerr := contract.ParseLSN(in.ReceivedLSN)
	replayed, perr := contract.ParseLSN(in.ReplayedLSN)
	if rerr != nil && perr != nil {
		return placement.WALProgress{}, false
	}
	return placement.WALProgress{Received: uint64(max(received, replayed)), Replayed: uint64(replayed)}, true
}
