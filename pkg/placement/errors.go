package placement

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidPlacement marks an input the engine cannot interpret: a placement field it does not
// support, a malformed selector, a duplicate cluster name. Such errors wrap it, so callers can tell
// them from an UnschedulableError with errors.Is.
var ErrInvalidPlacement = errors.New("invalid placement")

// UnschedulableError says why no decision satisfies the placement. Its message follows Karmada's:
// "0/5 clusters fit: 2 unreachable (dbfleet.io/unreachable), 3 excluded by clusterAffinity".
type UnschedulableError struct {
	// AffinityName is the clusterAffinities term this failure belongs to; empty with clusterAffinity.
	AffinityName string
	// Clusters is how many clusters were considered, Fit how many passed the filters.
	Clusters, Fit int
	// Problem says why the clusters that fit were not enough; empty when none fit.
	Problem string
	// Excluded are the clusters the filters rejected, sorted by name.
	Excluded []Exclusion
	// Next is the failure of the following clusterAffinities term, tried after this one.
	Next *UnschedulableError
}

// ReasonCount is how many clusters were excluded for one reason.
type ReasonCount struct {
	Reason string
	Count  int
}

// Reasons summarises Excluded, fewest first, ties by reason, so the message is deterministic.
func (e *UnschedulableError) Reasons() []ReasonCount {
	counts := map[string]int{}
	for _, ex := range e.Excluded {
		counts[ex.Reason]++
	}
	out := make([]ReasonCount, 0, len(counts))
	for reason, n := range counts {
		out = append(out, ReasonCount{Reason: reason, Count: n})
	}
	slices.SortFunc(out, func(a, b ReasonCount) int {
		if a.Count != b.Count {
			return a.Count - b.Count
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	return out
}

func (e *UnschedulableError) Error() string {
	var b strings.Builder
	for cur := e; cur != nil; cur = cur.Next {
		if cur != e {
			b.WriteString("; ")
		}
		cur.writeOne(&b)
	}
	return b.String()
}

func (e *UnschedulableError) writeOne(b *strings.Builder) {
	if e.AffinityName != "" {
		b.WriteString("clusterAffinities[")
		b.WriteString(e.AffinityName)
		b.WriteString("]: ")
	}
	b.WriteString(strconv.Itoa(e.Fit))
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(e.Clusters))
	b.WriteString(" clusters fit")
	if e.Problem != "" {
		b.WriteString(" but ")
		b.WriteString(e.Problem)
	}
	reasons := e.Reasons()
	switch {
	case len(reasons) > 0:
		b.WriteString(": ")
		for i, r := range reasons {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Itoa(r.Count))
			b.WriteByte(' ')
			b.WriteString(r.Reason)
		}
	case e.Clusters == 0:
		b.WriteString(": no member clusters")
	}
}
