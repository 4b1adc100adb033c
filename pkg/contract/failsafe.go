package contract

import "time"

// The failsafe window and the silence a failover needs (docs/failover.md, "Failsafe and
// promotion from silence"). Both sides count on their own monotonic clocks; no clock is compared
// with another.
const (
	// FailsafeWindow is how long after a primary last heard from a standby (a reply to WAL it
	// inserted after it noted the time) that hearing still counts. A primary whose Lease has run
	// out keeps taking writes only while it has heard every standby of its membership within
	// this window, and stops FenceSafety before the earliest hearing gets this old.
	FailsafeWindow = 10 * time.Second
	// PromotionSilence is how long a standby must have exchanged nothing with any primary before
	// it may promote in a failover: FailsafeWindow, plus MaxClockSkew and FenceSafety as margins
	// for the two clocks' rates and the old primary's shutdown. The old primary heard it last at
	// or before its last exchange, so by then it has stopped taking writes (the Lease aside,
	// which the hub's fencing gate waits out).
	PromotionSilence = FailsafeWindow + MaxClockSkew + FenceSafety
)
