package placement

import (
	"math"
	"math/bits"
)

// party is one cluster in a divisor-method apportionment. Fields are ordered so that it takes 24
// bytes: a large fleet has a party per cluster.
type party struct {
	// weight is the cluster's votes; parties with weight 0 never get a seat.
	weight int64
	// node is the cluster's index in name order; it breaks the last ties, so results never
	// depend on input order.
	node int32
	// limit is the most seats the party may get.
	limit int32
	// favoured seats are the first ones the party held in the previous decision: on an exact tie
	// they go first, so an unchanged input reproduces the previous decision.
	favoured int32
	// seats is the result.
	seats int32
}

// apportion hands out `seats` seats one at a time by the Webster (Sainte-Laguë) method: the next
// seat goes to the party with the highest weight/(2*seats+1), never beyond its limit. Ties go to a
// favoured seat, then to the party with fewer seats (Karmada's rule: small clusters first helps
// high availability), then to the earlier name.
//
// Because every party's seats are ranked by one fixed total order that does not depend on the
// number of seats, the result for n+1 seats is the result for n seats plus one seat (house
// monotonicity), and removing a party leaves the others' relative order intact (uniformity).
// It returns how many seats were placed: fewer than asked only when the limits are exhausted.
func apportion(parties []party, seats int64, ws *workspace) int64 {
	ws.heap = grow(ws.heap, len(parties))
	h := partyHeap{parties: parties, order: ws.heap[:0]}
	for i := range parties {
		parties[i].seats = 0
		if parties[i].weight > 0 && parties[i].limit > 0 {
			h.order = append(h.order, int32(i))
		}
	}
	if 0 < seats && seats < int64(len(h.order)) {
		h.order = firstSeated(parties, h.order, int(seats), ws)
	}
	if int64(len(h.order)) == seats && oneSeatEach(parties, h.order) {
		for _, i := range h.order {
			parties[i].seats = 1
		}
		return seats
	}
	placed := settleSure(parties, h.order, seats)
	if placed > 0 {
		open := h.order[:0] // the parties below their limit
		for _, i := range h.order {
			if parties[i].seats < parties[i].limit {
				open = append(open, i)
			}
		}
		h.order = open
	}
	h.init()
	for ; placed < seats && len(h.order) > 0; placed++ {
		top := &parties[h.order[0]]
		top.seats++
		if top.seats >= top.limit {
			h.removeTop()
		} else {
			h.down(0)
		}
	}
	return placed
}

// settleSure gives each party every seat k whose priority weight/(2k+1) exceeds x =
// W/(2*seats-n), W being the parties' total weight and n their number, and returns how many
// that is. A party of weight w has at most w/2x + 1/2 such seats, so there are at most `seats`
// of them, and they are the first ones the method hands out: the heap only places the rest.
// It gives none when seats are fewer than half the parties, or weights reach 2^31.
func settleSure(parties []party, order []int32, seats int64) int64 {
	q := 2*seats - int64(len(order))
	if q <= 0 || q >= 1<<31 {
		return 0
	}
	var p int64 // x = p/q
	for _, i := range order {
		if parties[i].weight >= 1<<31 {
			return 0
		}
		p += parties[i].weight
	}
	var settled int64
	for _, i := range order {
		pt := &parties[i]
		// The seats k with w/(2k+1) > p/q are those with an odd 2k+1 <= (w*q-1)/p.
		sure := min(((pt.weight*q-1)/p+1)/2, int64(pt.limit))
		pt.seats = int32(sure)
		settled += sure
	}
	return settled
}

// oneSeatEach reports whether, with as many seats as parties, each party wins exactly one: when
// even the heaviest party's second seat (weight/3) ranks below the lightest one's first seat,
// every first seat comes before every second seat.
func oneSeatEach(parties []party, order []int32) bool {
	if len(order) == 0 {
		return false
	}
	heaviest, lightest := parties[order[0]].weight, parties[order[0]].weight
	for _, i := range order {
		heaviest, lightest = max(heaviest, parties[i].weight), min(lightest, parties[i].weight)
	}
	return lightest > math.MaxInt64/3 || heaviest < 3*lightest
}

// firstSeated narrows order, the parties that may win seats, to the `seats` whose first seat
// comes first: no other party can win one, since `seats` first seats rank ahead of its own and a
// party's later seats rank behind its first. With many more parties than seats (dynamic weights
// over a large fleet) the heap then holds only these. When the parties are not in name order, or
// their weights do not fit firstSeatKey, order is returned unchanged.
func firstSeated(parties []party, order []int32, seats int, ws *workspace) []int32 {
	if len(order) > indexMask {
		return order
	}
	ws.keys = grow(ws.keys, len(order))
	keys := ws.keys
	for k, i := range order {
		p := &parties[i]
		key, fits := firstSeatKey(p.weight, p.favoured, int32(k))
		if !fits || (k > 0 && p.node < parties[order[k-1]].node) {
			return order
		}
		keys[k] = key
	}
	ws.scratch = grow(ws.scratch, len(order))
	radixSort(keys, ws.scratch, indexBits)
	for k := range seats {
		keys[k] = uint64(order[keys[k]&indexMask]) // the party; keys beyond seats are not read
	}
	for k := range seats {
		order[k] = int32(keys[k])
	}
	return order[:seats]
}

// firstSeatKey makes a party's first seat an integer key: sorted by radixSort, keys of
// parties in name order ending in increasing numbers (positions or nodes, below 2^indexBits) rank
// first seats as nextFirst does: more weight first, then favoured, then name. It reports whether
// the weight fits (below 2^39); the key ends in low either way.
func firstSeatKey(weight int64, favoured, low int32) (key uint64, fits bool) {
	const weightBits = 64 - indexBits - 1
	if weight >= 1<<weightBits {
		return uint64(low), false
	}
	var unfavoured uint64
	if favoured <= 0 {
		unfavoured = 1
	}
	return uint64(1<<weightBits-1-weight)<<(indexBits+1) | unfavoured<<indexBits | uint64(low), true
}

// partyHeap is a binary max-heap, by nextFirst, of indexes into parties. It is written out rather
// than using container/heap so that the hot loop neither allocates nor calls through interfaces.
type partyHeap struct {
	parties []party
	order   []int32
}

func (h *partyHeap) init() {
	for i := len(h.order)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *partyHeap) before(i, j int) bool {
	return nextFirst(&h.parties[h.order[i]], &h.parties[h.order[j]])
}

func (h *partyHeap) down(i int) {
	n := len(h.order)
	for {
		best := i
		if l := 2*i + 1; l < n && h.before(l, best) {
			best = l
		}
		if r := 2*i + 2; r < n && h.before(r, best) {
			best = r
		}
		if best == i {
			return
		}
		h.order[i], h.order[best] = h.order[best], h.order[i]
		i = best
	}
}

func (h *partyHeap) removeTop() {
	last := len(h.order) - 1
	h.order[0] = h.order[last]
	h.order = h.order[:last]
	h.down(0)
}

// nextFirst reports whether a's next seat comes before b's.
func nextFirst(a, b *party) bool {
	// Compare a.weight/(2*a.seats+1) with b.weight/(2*b.seats+1) exactly, in 128 bits.
	if c := cmpProducts(uint64(a.weight), uint64(2*int64(b.seats)+1), uint64(b.weight), uint64(2*int64(a.seats)+1)); c != 0 {
		return c > 0
	}
	if af, bf := a.seats < a.favoured, b.seats < b.favoured; af != bf {
		return af
	}
	if a.seats != b.seats {
		return a.seats < b.seats
	}
	return a.node < b.node
}

// cmpProducts compares x1*y1 with x2*y2 without overflow.
func cmpProducts(x1, y1, x2, y2 uint64) int {
	h1, l1 := bits.Mul64(x1, y1)
	h2, l2 := bits.Mul64(x2, y2)
	switch {
	case h1 != h2:
		if h1 > h2 {
			return 1
		}
		return -1
	case l1 != l2:
		if l1 > l2 {
			return 1
		}
		return -1
	}
	return 0
}

// noLimit is the limit of a party that capacity does not bound.
const noLimit = math.MaxInt32
