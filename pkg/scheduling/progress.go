package scheduling

import (
	"fmt"
	"strconv"
	"strings"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
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
			received, rerr := ParseLSN(in.ReceivedLSN)
			replayed, perr := ParseLSN(in.ReplayedLSN)
			if rerr != nil && perr != nil {
				continue
			}
			p := placement.WALProgress{Received: max(received, replayed), Replayed: replayed}
			if !found || p.Compare(best) > 0 {
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

// ParseLSN reads a PostgreSQL LSN, "X/Y" in hexadecimal, as a byte position.
func ParseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if !ok {
		return 0, fmt.Errorf("LSN %q is not X/Y", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", s, err)
	}
	return h<<32 | l, nil
}
