package contact

import (
	"slices"
	"testing"
	"time"

	"github.com/dbfleet/dbfleet/pkg/contract"
)

func TestAReplyIsHeardAtTheProbeItAcknowledgesNotWhenItArrives(t *testing.T) {
	t0 := time.Now()
	var h Hearing
	h.Probe(t0, 100)
	h.Probe(t0.Add(time.Second), 200)
	h.Probe(t0.Add(2*time.Second), 300)
	// Read at t0+10s, long after it was sent: what it acknowledges bounds when it was sent.
	h.Reply("a", 250)
	if got := h.Heard("a"); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("heard at %v, want the probe at 200 (t0+1s)", got.Sub(t0))
	}
	// Exactly at a probe's position: nothing past it was acknowledged.
	h.Reply("b", 100)
	if got := h.Heard("b"); !got.IsZero() {
		t.Fatalf("a reply at the first probe's position was heard at %v; nothing past a probe was acknowledged", got.Sub(t0))
	}
	h.Reply("b", 101)
	if got := h.Heard("b"); !got.Equal(t0) {
		t.Fatalf("heard at %v, want t0", got.Sub(t0))
	}
	// An older reply read later never moves a hearing back.
	h.Reply("a", 150)
	if got := h.Heard("a"); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("an older reply moved the hearing to %v", got.Sub(t0))
	}
}

func TestJudgeNeedsEveryMemberWithinTheWindow(t *testing.T) {
	t0 := time.Now()
	w := contract.FailsafeWindow
	var h Hearing
	h.Probe(t0, 100)
	h.Probe(t0.Add(3*time.Second), 200)
	h.Reply("a", 150) // heard at t0
	h.Reply("b", 250) // heard at t0+3s

	j := h.Judge([]string{"a", "b"}, w, t0.Add(5*time.Second))
	if len(j.Unheard) != 0 || !j.Until.Equal(t0.Add(w)) {
		t.Fatalf("judgement %+v; want until t0+window (a, the earliest)", j)
	}
	j = h.Judge([]string{"a", "b", "c"}, w, t0.Add(5*time.Second))
	if !slices.Equal(j.Unheard, []string{"c"}) || !j.Until.IsZero() {
		t.Fatalf("judgement %+v; want c unheard and no until", j)
	}
	j = h.Judge([]string{"a", "b"}, w, t0.Add(w))
	if !slices.Equal(j.Unheard, []string{"a"}) || !j.Until.IsZero() {
		t.Fatalf("judgement %+v at t0+window; want a unheard", j)
	}
	now := t0.Add(time.Hour)
	if j := h.Judge(nil, w, now); !j.Until.Equal(now.Add(w)) || len(j.Unheard) != 0 {
		t.Fatalf("no members: %+v; want until now+window", j)
	}
}

func TestALowerPositionForgetsWhatWasHeard(t *testing.T) {
	t0 := time.Now()
	var h Hearing
	h.Probe(t0, 1000)
	h.Probe(t0.Add(time.Second), 2000)
	h.Reply("a", 2500)
	h.Probe(t0.Add(2*time.Second), 500) // another server answered
	if got := h.Heard("a"); !got.IsZero() {
		t.Fatalf("heard %v after the position went back; want forgotten", got)
	}
}

func TestOldProbesAreDropped(t *testing.T) {
	t0 := time.Now()
	var h Hearing
	for i := range 1000 {
		h.Probe(t0.Add(time.Duration(i)*500*time.Millisecond), contract.LSN(100*(i+1)))
	}
	if n := len(h.probes); n > int(keepProbes/(500*time.Millisecond))+2 {
		t.Fatalf("%d probes kept", n)
	}
}

func TestSilenceCountsFromTheFirstReadingThatFoundTheWalreceiverGone(t *testing.T) {
	t0 := time.Now()
	s := NewSilence(t0)
	if got := s.For(t0.Add(time.Minute)); got != 0 {
		t.Fatalf("silent %v before any reading; a new process must assume contact until it reads", got)
	}
	s.Observe(t0.Add(time.Second), true)
	s.Observe(t0.Add(2*time.Second), false) // it may have sent until just before this reading
	s.Observe(t0.Add(3*time.Second), false)
	if got := s.For(t0.Add(12 * time.Second)); got != 10*time.Second {
		t.Fatalf("silent %v, want 10s (from the first reading that found it gone)", got)
	}
	s.Unknown(t0.Add(13 * time.Second))
	if got := s.For(t0.Add(14 * time.Second)); got != 0 {
		t.Fatalf("silent %v after a reading that could not tell; want 0", got)
	}
	s.Observe(t0.Add(15*time.Second), false)
	if got := s.For(t0.Add(20 * time.Second)); got != 5*time.Second {
		t.Fatalf("silent %v, want 5s", got)
	}
}
