package decide

import (
	"fmt"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// replayedPast says whether a standby that has replayed up to replayed (pg_last_wal_replay_lsn:
// the end of the last record it replayed) has replayed the record that starts at target (the old
// primary's shutdown checkpoint), and with it every record before: only then may it be promoted
// without losing a commit of the old primary. It says why not otherwise; a target that is no LSN
// is never reached.
func replayedPast(target, replayed string) (bool, string) {
	t, err := contract.ParseLSN(target)
	if err != nil {
		return false, fmt.Sprintf("the promote-after LSN is malformed (%v): not promoting", err)
	}
	if replayed == "" {
		return false, fmt.Sprintf("waiting to replay past %s (the old primary's final LSN) before promoting; the replayed LSN is not known yet", target)
	}
	r, err := contract.ParseLSN(replayed)
	if err != nil {
		return false, fmt.Sprintf("waiting to replay past %s (the old primary's final LSN) before promoting; the replayed LSN %q cannot be read: %v", target, replayed, err)
	}
	if r <= t {
		return false, fmt.Sprintf("waiting to replay past %s (the old primary's final LSN) before promoting; replayed up to %s", target, replayed)
	}
	return true, ""
}
