package decide

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseLSN reads a WAL location as postgres prints it: two hexadecimal halves, "16/B374D848".
func ParseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok || hi == "" || lo == "" || len(hi) > 8 || len(lo) > 8 {
		return 0, fmt.Errorf("%q is not a WAL location (like 0/3000060)", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a WAL location (like 0/3000060): %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a WAL location (like 0/3000060): %w", s, err)
	}
	return h<<32 | l, nil
}

// replayedPast says whether a standby that has replayed up to replayed (pg_last_wal_replay_lsn:
// the end of the last record it replayed) has replayed the record that starts at target (the old
// primary's shutdown checkpoint), and with it every record before: only then may it be promoted
// without losing a commit of the old primary. It says why not otherwise; a target that is no LSN
// is never reached.
func replayedPast(target, replayed string) (bool, string) {
	t, err := ParseLSN(target)
	if err != nil {
		return false, fmt.Sprintf("the promote-after LSN is malformed (%v): not promoting", err)
	}
	if replayed == "" {
		return false, fmt.Sprintf("waiting to replay past %s (the old primary's final LSN) before promoting; the replayed LSN is not known yet", target)
	}
	r, err := ParseLSN(replayed)
	if err != nil {
		return false, fmt.Sprintf("waiting to replay past %s (the old primary's final LSN) before promoting; the replayed LSN %q cannot be read: %v", target, replayed, err)
	}
	if r <= t {
		return false, fmt.Sprintf("waiting to replay past %s (the old primary's final LSN) before promoting; replayed up to %s", target, replayed)
	}
	return true, ""
}
