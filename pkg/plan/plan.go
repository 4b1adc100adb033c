package plan

import (
	"errors"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	dbfleetv1alpha1 "github.com/dbfleet/dbfleet/api/v1alpha1"
	"github.com/dbfleet/dbfleet/pkg/placement"
	"github.com/dbfleet/dbfleet/pkg/scheduling"
)

// Result is the plan of one DatabaseCluster: the object with the status the hub would write, and
// what the engine decided.
type Result struct {
	Database *dbfleetv1alpha1.DatabaseCluster
	Outcome  scheduling.Outcome
	// Excluded lists every cluster without a share and why.
	Excluded []placement.Exclusion
	// Refused is what the API server would refuse in the status the hub would write (see
	// CheckStatus).
	Refused field.ErrorList
}

// Schedulable reports whether the DatabaseCluster got a placement the hub can record.
func (r *Result) Schedulable() bool { return r.Outcome.Decision != nil && len(r.Refused) == 0 }

// Run plans every DatabaseCluster of the fleet, sorted by namespace and name. It shows the
// placement the policy calls for now (as after a dbfleet.io/rebalance), which the hub adopts only
// when something calls for a re-placement.
func Run(f *Fleet, now time.Time) []Result {
	members := make(map[string]*dbfleetv1alpha1.MemberCluster, len(f.Members))
	for i := range f.Members {
		members[f.Members[i].Name] = &f.Members[i]
	}
	results := make([]Result, 0, len(f.Databases))
	for i := range f.Databases {
		dbc := f.Databases[i].DeepCopy()
		avoid := map[string]dbfleetv1alpha1.EvictionReason{}
		for _, e := range dbc.Status.Evictions {
			avoid[e.Cluster] = e.Reason
		}
		dbc.Status.ObservedGeneration = dbc.Generation
		if scheduling.RefuseReservedNamespace(dbc) {
			// The hub's admission policy refuses it, and its controllers place nothing for it.
			results = append(results, Result{Database: dbc, Outcome: scheduling.Outcome{Reason: dbfleetv1alpha1.ReasonReservedNamespace}})
			continue
		}
		out := scheduling.Schedule(dbc, f.Policies, f.Cluster, members, now,
			scheduling.Options{Rebalance: true, Avoid: avoid})
		r := Result{Database: dbc, Outcome: out}
		switch {
		case out.Decision != nil:
			r.Excluded = out.Decision.Excluded
		case out.Err != nil:
			var u *placement.UnschedulableError
			if errors.As(out.Err, &u) {
				r.Excluded = u.Excluded
			}
		}
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b Result) int {
		if c := strings.Compare(a.Database.Namespace, b.Database.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Database.Name, b.Database.Name)
	})
	return results
}
