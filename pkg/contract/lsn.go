package contract

import (
	"fmt"
	"strconv"
	"strings"
)

// LSN is a WAL location as a byte position. Postgres prints it as two hexadecimal halves,
// "16/B374D848", and so do the /status body, the MemberDatabase status and the promote-after
// annotation.
type LSN uint64

// ParseLSN reads a WAL location as postgres prints it.
func ParseLSN(s string) (LSN, error) {
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
	return LSN(h<<32 | l), nil
}

// String prints the location as postgres does.
func (l LSN) String() string { return fmt.Sprintf("%X/%X", uint64(l)>>32, uint64(l)&0xFFFFFFFF) }
