package placement

import (
	"math/rand/v2"
	"testing"
)

// greedyApportion is the divisor method stated directly: each seat goes to the party whose next
// seat comes first, found by scanning every party.
func greedyApportion(parties []party, seats int64) int64 {
	for i := range parties {
		parties[i].seats = 0
	}
	placed := int64(0)
	for ; placed < seats; placed++ {
		best := -1
		for i := range parties {
			p := &parties[i]
			if p.weight > 0 && p.seats < p.limit && (best < 0 || nextFirst(p, &parties[best])) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		parties[best].seats++
	}
	return placed
}

// TestApportionMatchesGreedy checks the heap, and its narrowing to the parties whose first seat
// comes first, against the direct method, with parties in name order (narrowed) and not.
func TestApportionMatchesGreedy(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	ws := new(workspace)
	for round := range 3000 {
		n := 1 + r.IntN(300)
		parties := make([]party, n)
		wide := round%4 == 0 // otherwise weights of 0 to 3: many ties
		for i := range parties {
			p := &parties[i]
			p.node = int32(i)
			p.weight = int64(r.IntN(4))
			if wide {
				p.weight = int64(r.IntN(1 << 20))
			}
			if round%50 == 0 {
				p.weight = int64(1)<<40 + int64(r.IntN(3)) // too large for the radix keys
			}
			p.limit = int32(r.IntN(4))
			if r.IntN(4) == 0 {
				p.limit = noLimit
			}
			p.favoured = int32(r.IntN(5)) - 1
		}
		if round%3 == 0 {
			r.Shuffle(n, func(i, j int) { parties[i], parties[j] = parties[j], parties[i] })
		}
		seats := int64(r.IntN(2 * n))
		want := append([]party(nil), parties...)
		wantPlaced := greedyApportion(want, seats)
		if placed := apportion(parties, seats, ws); placed != wantPlaced {
			t.Fatalf("round %d: placed %d, want %d", round, placed, wantPlaced)
		}
		for i := range parties {
			if parties[i].seats != want[i].seats {
				t.Fatalf("round %d: party %d got %d seats, want %d", round, i, parties[i].seats, want[i].seats)
			}
		}
	}
}

// TestApportionSmall compares small apportionments with the direct method, where exact ties
// between seats are frequent: they decide at the edges of the shortcuts apportion takes.
func TestApportionSmall(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 17))
	ws := new(workspace)
	for round := range 100000 {
		parties := make([]party, 1+r.IntN(6))
		for i := range parties {
			parties[i] = party{node: int32(i), weight: int64(1 + r.IntN(6)), limit: int32(1 + r.IntN(4)), favoured: int32(r.IntN(3))}
			if r.IntN(3) == 0 {
				parties[i].limit = noLimit
			}
		}
		seats := int64(r.IntN(16))
		want := append([]party(nil), parties...)
		wantPlaced := greedyApportion(want, seats)
		if placed := apportion(parties, seats, ws); placed != wantPlaced {
			t.Fatalf("round %d: placed %d, want %d", round, placed, wantPlaced)
		}
		for i := range parties {
			if parties[i].seats != want[i].seats {
				t.Fatalf("round %d, %d seats over %+v: party %d got %d seats, want %d", round, seats, want, i, parties[i].seats, want[i].seats)
			}
		}
	}
}
