package placement

import "sync"

// workspace holds the scratch memory of one decision. Decisions over thousands of clusters need
// several arrays of that length; allocating them fresh each time costs more than computing the
// decision (page faults and zeroing of large objects), so they are pooled. Only the Decision the
// caller receives is freshly allocated.
type workspace struct {
	order    []int32
	keys     []uint64
	scratch  []uint64
	nodes    []node
	cands    []int32
	ranked   []int32
	chosen   []int32
	taken    []bool
	group    [][]int32
	groupIDs []map[string]int32
	inGroup  [][]bool
	weightOf []int64
	parties  []party
	weighted []int32
	heap     []int32
	// known[k] says Previous.Shares[k] names an input cluster; withRange lists the nodes with a
	// usable previous range.
	known     []bool
	withRange []int32
	// owners, occupied, union and fresh are assignOrdinals' (see there).
	owners   []int32
	occupied []interval
	union    []interval
	fresh    []bool
	// whys are the decision's explanations (see explID), taints those of taints (see taintTexts).
	whys   whyTable
	taints map[taintKey]explID
}

var workspaces = sync.Pool{New: func() any { return new(workspace) }}

// release returns the workspace to the pool. Only whys, taints and groupIDs point outside the
// workspace, to this decision's messages and the clusters' taints and fields; clearing them lets
// the pool keep nothing of the decision alive.
func (w *workspace) release() {
	clear(w.whys)
	clear(w.taints)
	for _, ids := range w.groupIDs {
		clear(ids)
	}
	workspaces.Put(w)
}

// grow returns s resized to n elements, reallocating only when its capacity is too small. The
// elements are not cleared: callers overwrite every one they read.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/4)
	}
	return s[:n]
}
