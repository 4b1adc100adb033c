package contact

import "time"

// Silence is the standby's side: how long it has exchanged nothing with any primary. While its
// walreceiver is connected it sends replies the primary may count as hearing from it (Hearing),
// so contact is judged from the connection, not from what arrives: a pg_stat_wal_receiver row
// exists from the moment the connection is established until the walreceiver marks itself gone,
// before it disconnects. The last contact is the end of the first reading that found the
// walreceiver gone (it may have sent until just before that reading), and every reading that
// found it connected, or could not tell.
type Silence struct {
	last      time.Time
	connected bool
}

// NewSilence starts counting at start: an earlier process may have been in contact until then.
func NewSilence(start time.Time) *Silence { return &Silence{last: start, connected: true} }

// Observe records a reading that ended at at and found the walreceiver connected or not.
func (s *Silence) Observe(at time.Time, connected bool) {
	if (connected || s.connected) && at.After(s.last) {
		s.last = at
	}
	s.connected = connected
}

// Unknown records a reading, ended at at, that could not tell (the server did not answer while
// postgres runs): counted as contact.
func (s *Silence) Unknown(at time.Time) { s.Observe(at, true) }

// For is how long the standby has been silent at now.
func (s *Silence) For(now time.Time) time.Duration {
	if s.connected || now.Before(s.last) {
		return 0
	}
	return now.Sub(s.last)
}
