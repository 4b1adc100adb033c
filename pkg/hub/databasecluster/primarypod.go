package databasecluster

import (
	"fmt"
	"slices"
	"strings"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/placement"
)

// instanceReading is one instance of a share and how far its report says it is in the WAL.
type instanceReading struct {
	cluster, pod string
	ordinal      int32
	progress     placement.WALProgress
	// reported is false when the instance reported no WAL position (not running, not read).
	reported bool
}

func (r instanceReading) String() string {
	if !r.reported {
		return fmt.Sprintf("%s/%s no WAL position reported", r.cluster, r.pod)
	}
	return fmt.Sprintf("%s/%s received %s replayed %s", r.cluster, r.pod, contract.LSN(r.progress.Received).String(), contract.LSN(r.progress.Replayed).String())
}

// shareReadings are the readings of the pods of a share (ordinals start to start+count-1), in
// ordinal order, from its MemberDatabase's status.instances[] (mdb may be nil: nothing reported).
// eligible, when not nil, keeps only the pods it accepts.
func shareReadings(db, cluster string, start, count int32, mdb *dbfleetv1alpha1.MemberDatabase, eligible func(pod string) bool) []instanceReading {
	var out []instanceReading
	for o := start; o < start+count; o++ {
		pod := contract.PodName(db, o)
		if eligible != nil && !eligible(pod) {
			continue
		}
		r := instanceReading{cluster: cluster, pod: pod, ordinal: o}
		r.progress, r.reported = shareOf(mdb).progress(pod)
		out = append(out, r)
	}
	return out
}

// choosePrimaryPod picks the reading whose instance is furthest in the WAL (received, then
// replayed LSN: CloudNativePG's order). An instance that reported nothing counts as having
// nothing. Ties keep the pod of ordinal keep when it is among them, else the lowest ordinal, so
// a choice never changes for nothing. It returns the index of the chosen reading, -1 when there
// are none.
func choosePrimaryPod(readings []instanceReading, keep int32) int {
	best := -1
	for i, r := range readings {
		if best < 0 {
			best = i
			continue
		}
		if c := r.compare(readings[best]); c > 0 || c == 0 && r.ordinal == keep {
			best = i
		}
	}
	return best
}

// compare orders readings by progress; one without a report is behind any with one.
func (r instanceReading) compare(o instanceReading) int {
	switch {
	case r.reported && o.reported:
		return r.progress.Compare(o.progress)
	case r.reported:
		return 1
	case o.reported:
		return -1
	}
	return 0
}

// primaryPodChoice is the pod a promotion puts the primary on, and the readings compared.
type primaryPodChoice struct {
	pod     string
	ordinal int32
	// compared are the readings of every share that could take the primary, the chosen one
	// first: what the Event and the condition say was compared.
	compared []instanceReading
	// eligibleOnly says only the synchronous standbys were compared (dataDurability required).
	eligibleOnly bool
}

// choosePromotedPod picks, in cluster to's share of the planned placement, the pod a promotion
// makes the primary: the share's instance furthest in the WAL, and with dataDurability required
// only one of the quorum. The other shares' readings are gathered too, for the record of what
// the placement engine compared across clusters. Without any reading it is the share's lowest
// ordinal.
func choosePromotedPod(s *scope, planned *dbfleetv1alpha1.DatabaseCluster, to string) primaryPodChoice {
	db := s.dbc.Name
	var eligible func(string) bool
	out := primaryPodChoice{ordinal: -1}
	if required(s.dbc) {
		quorum, _ := quorumOf(s)
		eligible = func(pod string) bool { return slices.Contains(quorum, pod) }
		out.eligibleOnly = true
	}
	var others []instanceReading
	for _, pl := range planned.Status.Placements {
		readings := shareReadings(db, pl.Cluster, pl.Ordinals.Start, pl.Ordinals.Count, s.memberDBs[pl.Cluster], eligible)
		if pl.Cluster != to {
			for _, r := range readings {
				if r.reported {
					others = append(others, r)
				}
			}
			continue
		}
		out.ordinal = pl.Ordinals.Start
		if k := choosePrimaryPod(readings, pl.Ordinals.Start); k >= 0 {
			out.ordinal = readings[k].ordinal
			out.compared = append(out.compared, readings[k])
			readings = slices.Delete(readings, k, k+1)
		}
		for _, r := range readings {
			if r.reported {
				out.compared = append(out.compared, r)
			}
		}
	}
	slices.SortStableFunc(others, func(a, b instanceReading) int { return b.compare(a) })
	out.compared = append(out.compared, others...)
	if out.ordinal >= 0 {
		out.pod = contract.PodName(db, out.ordinal)
	}
	return out
}

// maxCompared bounds how many readings a message lists.
const maxCompared = 6

// describe says which pod was chosen and on what readings, for the condition and the Event.
func (c primaryPodChoice) describe() string {
	if len(c.compared) == 0 || !c.compared[0].reported {
		if c.eligibleOnly {
			return fmt.Sprintf("pod %s (no synchronous standby reported a WAL position: the share's lowest eligible ordinal)", c.pod)
		}
		return fmt.Sprintf("pod %s (no instance reported a WAL position: the share's lowest ordinal)", c.pod)
	}
	parts := make([]string, 0, min(len(c.compared), maxCompared))
	for _, r := range c.compared[:min(len(c.compared), maxCompared)] {
		parts = append(parts, r.String())
	}
	list := strings.Join(parts, "; ")
	if more := len(c.compared) - maxCompared; more > 0 {
		list += fmt.Sprintf("; and %d more", more)
	}
	of := "instances"
	if c.eligibleOnly {
		of = "synchronous standbys"
	}
	return fmt.Sprintf("pod %s, the furthest in the WAL of the %s compared (%s)", c.pod, of, list)
}

// primaryPod is the current primary's pod: status.primary.pod, or for a status written before
// that field, the lowest ordinal of the primary cluster's share. Empty without a primary.
func primaryPod(dbc *dbfleetv1alpha1.DatabaseCluster) string {
	p := dbc.Status.Primary
	if p == nil || p.Cluster == "" {
		return ""
	}
	if p.Pod != "" {
		return p.Pod
	}
	for _, pl := range dbc.Status.Placements {
		if pl.Cluster == p.Cluster {
			return contract.PodName(dbc.Name, pl.Ordinals.Start)
		}
	}
	return ""
}

// namePrimaryPod fills in status.primary.pod where a status written before the field lacks it:
// the lowest ordinal, which is what such a primary runs on.
func namePrimaryPod(dbc *dbfleetv1alpha1.DatabaseCluster) {
	if p := dbc.Status.Primary; p != nil && p.Pod == "" {
		p.Pod = primaryPod(dbc)
	}
}

// primaryOrdinalOf is the ordinal of the primary pod in cluster's share when that share holds
// the primary, else nil.
func primaryOrdinalOf(dbc *dbfleetv1alpha1.DatabaseCluster, cluster string) *int32 {
	if p := dbc.Status.Primary; p == nil || p.Cluster != cluster {
		return nil
	}
	o, ok := contract.PodOrdinal(dbc.Name, primaryPod(dbc))
	if !ok {
		return nil
	}
	return &o
}

// shareProgress is the furthest WAL position any pod of the share reported, among those eligible
// accepts (nil: all); false when none reported one.
func shareProgress(s *scope, pl dbfleetv1alpha1.ClusterPlacement, eligible func(string) bool) (placement.WALProgress, bool) {
	var best placement.WALProgress
	found := false
	for _, r := range shareReadings(s.dbc.Name, pl.Cluster, pl.Ordinals.Start, pl.Ordinals.Count, s.memberDBs[pl.Cluster], eligible) {
		if r.reported && (!found || r.progress.Compare(best) > 0) {
			best, found = r.progress, true
		}
	}
	return best, found
}
