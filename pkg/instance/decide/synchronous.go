package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dbfleet/dbfleet/pkg/contract"
	"github.com/dbfleet/dbfleet/pkg/instance/pgconf"
)

// NoStandby is the name a required primary waits for when no other cluster holds a standby: no
// pod can be called so (it is no DNS label), so commits wait, as required says, until one does.
const NoStandby = "dbfleet: no standby in another cluster"

// Synchronous is what the pod asks of the primary's synchronous replication (the agent's
// annotations, from spec.postgres.synchronous and the other clusters' pods).
type Synchronous struct {
	// Durability is contract.DurabilityRequired or contract.DurabilityPreferred; empty: asynchronous.
	Durability string
	// Number is how many standbys a commit waits for.
	Number int
	// Standbys are the other clusters' pods.
	Standbys []string
}

// Enabled says whether synchronous replication is asked for.
func (s Synchronous) Enabled() bool { return s.Durability != "" && s.Number > 0 }

// Equal compares two.
func (s Synchronous) Equal(o Synchronous) bool {
	return s.Durability == o.Durability && s.Number == o.Number && slices.Equal(s.Standbys, o.Standbys)
}

// PlanSynchronous is synchronous_standby_names for the primary pod self, given its standbys as
// pg_stat_replication shows them, and what its status says of it:
//   - required: ANY number (standbys), always, so a commit waits for number of them, however
//     many stream; with no standby at all it waits for NoStandby;
//   - preferred: ANY k (standbys) with k the number asked for or, while fewer stream, the number
//     that stream; none: asynchronous (”).
func PlanSynchronous(want Synchronous, self string, replicas []contract.Replica) (string, *contract.Synchronous) {
	if !want.Enabled() {
		return "", nil
	}
	standbys := make([]string, 0, len(want.Standbys))
	for _, s := range want.Standbys {
		if s != self && !slices.Contains(standbys, s) {
			standbys = append(standbys, s)
		}
	}
	slices.Sort(standbys)
	st := &contract.Synchronous{Durability: want.Durability, Wanted: want.Number, Standbys: standbys}
	streaming := 0
	for _, r := range replicas {
		if !slices.Contains(standbys, r.Pod) {
			continue
		}
		if r.State == "streaming" {
			streaming++
		}
		if (r.SyncState == "sync" || r.SyncState == "quorum") && !slices.Contains(st.Synchronous, r.Pod) {
			st.Synchronous = append(st.Synchronous, r.Pod)
		}
	}
	slices.Sort(st.Synchronous)
	var names string
	switch want.Durability {
	case contract.DurabilityPreferred:
		st.Number = min(want.Number, streaming)
		st.Degraded = streaming < want.Number
		names = pgconf.StandbyNames(st.Number, standbys)
	default:
		st.Number = want.Number
		st.Waiting = streaming < want.Number
		listed := standbys
		if len(listed) == 0 {
			listed = []string{NoStandby}
		}
		names = pgconf.StandbyNames(want.Number, listed)
	}
	return names, st
}

// SynchronousMessage says why commits wait (required) or wait for fewer (preferred); empty when
// neither.
func SynchronousMessage(st *contract.Synchronous) string {
	if st == nil || !st.Waiting && !st.Degraded {
		return ""
	}
	listed := "no standby in another cluster"
	if len(st.Standbys) > 0 {
		listed = strings.Join(st.Standbys, ", ")
	}
	if st.Waiting {
		return fmt.Sprintf("commits wait for %d synchronous standbys of %s (dataDurability required); %s confirm now",
			st.Wanted, listed, countOrNone(st.Synchronous))
	}
	return fmt.Sprintf("fewer than %d synchronous standbys of %s stream (dataDurability preferred): commits wait for %d (%s confirm now)",
		st.Wanted, listed, st.Number, countOrNone(st.Synchronous))
}

func countOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
