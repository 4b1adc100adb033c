package contact

import (
	"slices"
	"sort"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

// Hearing is the primary's side. A standby's reply (pg_stat_replication.write_lsn) proves it was
// alive after the primary inserted the WAL it acknowledges; a reply's own timestamp
// (reply_time) is on the standby's clock, and its arrival time says nothing of when it was sent
// (a reply held in a network buffer may arrive long after the standby stopped). So the primary
// probes: before it reads its WAL insert position L it notes its own clock t, and a reply that
// acknowledges WAL past L was sent after t. The primary counts the standby as heard at t, never
// later, whatever the network delays: a round trip on one clock.
type Hearing struct {
	// probes are (t, L) pairs in the order taken: both ascend.
	probes []probe
	heard  map[string]time.Time
}

type probe struct {
	at  time.Time
	lsn contract.LSN
}

// keepProbes bounds the probes kept: a reply acknowledging WAL only before them would be heard
// at a time older than any window this package is asked about.
const keepProbes = 4 * contract.FailsafeWindow

// Probe records that every WAL byte past lsn was inserted after at (at was read before lsn).
// The caller must then make sure WAL past lsn is written and sent (the manager's write check
// commits a transaction at every reading), or an idle primary would hear nobody.
func (h *Hearing) Probe(at time.Time, lsn contract.LSN) {
	if n := len(h.probes); n > 0 && lsn < h.probes[n-1].lsn {
		// A lower position: another timeline or another server; what was heard is no proof now.
		h.Reset()
	}
	h.probes = append(h.probes, probe{at: at, lsn: lsn})
	cut := 0
	for cut < len(h.probes)-1 && at.Sub(h.probes[cut].at) > keepProbes {
		cut++
	}
	h.probes = h.probes[cut:]
}

// Reply records that standby wrote WAL up to write: it heard the primary after the latest probe
// whose position is below write.
func (h *Hearing) Reply(standby string, write contract.LSN) {
	i := sort.Search(len(h.probes), func(i int) bool { return h.probes[i].lsn >= write })
	if i == 0 {
		return // nothing known to have been inserted after a probe reached it
	}
	at := h.probes[i-1].at
	if h.heard == nil {
		h.heard = map[string]time.Time{}
	}
	if at.After(h.heard[standby]) {
		h.heard[standby] = at
	}
}

// Heard is when standby was last heard (zero: never, since the last Reset).
func (h *Hearing) Heard(standby string) time.Time { return h.heard[standby] }

// Reset forgets everything: postgres stopped or runs as something else.
func (h *Hearing) Reset() {
	h.probes, h.heard = nil, nil
}

// Judge says until when the primary may count on having heard every one of members within
// window, as of now: the earliest of their last hearings plus window. Unheard lists those not
// heard within window (never, or too long ago), and Until is then zero. With no members there
// is nobody to hear from, and Until is now plus window: the caller judges again before then.
func (h *Hearing) Judge(members []string, window time.Duration, now time.Time) Judgement {
	j := Judgement{Members: slices.Clone(members), Until: now.Add(window)}
	for _, m := range members {
		heard := h.heard[m]
		switch {
		case heard.IsZero() || !now.Before(heard.Add(window)):
			j.Unheard = append(j.Unheard, m)
		case heard.Add(window).Before(j.Until):
			j.Until = heard.Add(window)
		}
	}
	if len(j.Unheard) > 0 {
		j.Until = time.Time{}
	}
	return j
}

// Judgement is what Judge says.
type Judgement struct {
	// Members are the standbys judged: the membership the primary answers to.
	Members []string
	// Unheard are the members not heard within the window.
	Unheard []string
	// Until is when the earliest hearing gets too old (zero when a member is unheard now).
	Until time.Time
}
