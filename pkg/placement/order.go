package placement

import (
	"slices"
	"strings"
)

// nameOrder returns the indexes of clusters in name order, and whether the names were already
// strictly increasing (so none repeats). Sorting names is the largest single cost of a decision
// over a big fleet, so:
//   - input already in name order (a caller scheduling many databases sorts its snapshot once)
//     is recognised with one linear pass;
//   - otherwise each name is reduced to a 64-bit key, the five bytes that follow the prefix all
//     names share plus the cluster's index, and the keys are radix-sorted. Names
//     whose five bytes tie ("us-east-1a", "us-east-1b") are then ordered by their full name.
func nameOrder(clusters []Cluster, ws *workspace) (order []int32, increasing bool) {
	ws.order = grow(ws.order, len(clusters))
	order = ws.order
	increasing = true
	for i := range clusters {
		order[i] = int32(i)
		if i > 0 && clusters[i-1].Name >= clusters[i].Name {
			increasing = false
		}
	}
	if increasing {
		return order, true
	}
	if len(clusters) >= 1<<indexBits {
		slices.SortFunc(order, func(a, b int32) int { return strings.Compare(clusters[a].Name, clusters[b].Name) })
		return order, false
	}

	prefix := commonPrefix(clusters)
	ws.keys = grow(ws.keys, len(clusters))
	ws.scratch = grow(ws.scratch, len(clusters))
	keys := ws.keys
	for i := range clusters {
		keys[i] = nameKey(clusters[i].Name, prefix)<<indexBits | uint64(i)
	}
	radixSortAbove(keys, ws.scratch, indexBits) // keys[i] ends in i: in order of the low bits
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi]>>indexBits == keys[lo]>>indexBits {
			hi++
		}
		if hi-lo > 1 {
			slices.SortFunc(keys[lo:hi], func(a, b uint64) int {
				return strings.Compare(clusters[a&indexMask].Name, clusters[b&indexMask].Name)
			})
		}
		lo = hi
	}
	for i, k := range keys {
		order[i] = int32(k & indexMask)
	}
	return order, false
}

const (
	indexBits = 24 // up to 16M clusters take the fast path
	indexMask = 1<<indexBits - 1
	keyBytes  = (64 - indexBits) / 8
)

// nameKey packs keyBytes bytes of the name after the shared prefix, big-endian and zero-padded,
// so integer order is name order up to ties.
func nameKey(name string, prefix int) uint64 {
	var k uint64
	for j := range keyBytes {
		k <<= 8
		if p := prefix + j; p < len(name) {
			k |= uint64(name[p])
		}
	}
	return k
}

func commonPrefix(clusters []Cluster) int {
	first := clusters[0].Name
	n := len(first)
	for i := 1; i < len(clusters) && n > 0; i++ {
		name := clusters[i].Name
		m := min(n, len(name))
		j := 0
		for j < m && name[j] == first[j] {
			j++
		}
		n = j
	}
	return n
}

// SortClusters sorts a fleet snapshot by name, in place. Schedule accepts clusters in any order
// and sorts them itself, but it recognises sorted input in one linear pass: a caller scheduling
// many databases against one snapshot should sort it once.
func SortClusters(clusters []Cluster) {
	slices.SortFunc(clusters, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })
}
