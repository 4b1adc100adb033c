package placement

import (
	"slices"
	"strings"
)

// nameOrder returns the indexes of clusters in name order, and the index of a cluster whose name
// appears more than once (the first such name), or -1. Sorting names is the largest single cost
// of a decision over a big fleet, so:
//   - input already in name order (a caller scheduling many databases sorts its snapshot once)
//     is recognised with one linear pass;
//   - otherwise each name is reduced to a 64-bit key, the five bytes that follow the prefix all
//     names share plus the cluster's index, and the keys are radix-sorted. Names
//     whose five bytes tie ("us-east-1a", "us-east-1b") are then ordered by their full name;
//     only they can repeat.
func nameOrder(clusters []Cluster, ws *workspace) (order []int32, dup int32) {
	ws.order = grow(ws.order, len(clusters))
	order = ws.order
	increasing := true
	for i := range clusters {
		order[i] = int32(i)
		// Once a pair is out of order the names are sorted below: stop comparing them.
		if increasing && i > 0 && clusters[i-1].Name >= clusters[i].Name {
			increasing = false
		}
	}
	if increasing {
		return order, -1
	}
	if len(clusters) >= 1<<indexBits {
		slices.SortFunc(order, func(a, b int32) int { return strings.Compare(clusters[a].Name, clusters[b].Name) })
		for i := 1; i < len(order); i++ {
			if clusters[order[i]].Name == clusters[order[i-1]].Name {
				return order, order[i]
			}
		}
		return order, -1
	}

	prefix := commonPrefix(clusters)
	ws.keys = grow(ws.keys, len(clusters))
	ws.scratch = grow(ws.scratch, len(clusters))
	keys := ws.keys
	for i := range clusters {
		keys[i] = nameKey(clusters[i].Name, prefix)<<indexBits | uint64(i)
	}
	// keys[i] ends in i, so the keys are in order of their low bits.
	radixSort(keys, ws.scratch, indexBits)
	// Names whose keys tie are ordered below; usually there are none.
	tied := false
	for i, k := range keys {
		order[i] = int32(k & indexMask)
		tied = tied || (i > 0 && k>>indexBits == keys[i-1]>>indexBits)
	}
	if !tied {
		return order, -1
	}
	dup = -1
	for lo := 0; lo < len(keys); {
		hi := lo + 1
		for hi < len(keys) && keys[hi]>>indexBits == keys[lo]>>indexBits {
			hi++
		}
		if hi-lo > 1 {
			group := keys[lo:hi]
			slices.SortFunc(group, func(a, b uint64) int {
				return strings.Compare(clusters[a&indexMask].Name, clusters[b&indexMask].Name)
			})
			for j := 1; j < len(group) && dup < 0; j++ {
				if clusters[group[j]&indexMask].Name == clusters[group[j-1]&indexMask].Name {
					dup = int32(group[j] & indexMask)
				}
			}
		}
		lo = hi
	}
	for i, k := range keys {
		order[i] = int32(k & indexMask)
	}
	return order, dup
}

const (
	indexBits = 24 // up to 16M clusters take the fast path
	indexMask = 1<<indexBits - 1
	keyBytes  = (64 - indexBits) / 8
)

// nameKey packs keyBytes bytes of the name after the shared prefix, big-endian and zero-padded,
// so integer order is name order up to ties.
func nameKey(name string, prefix int) uint64 {
	rest := name[prefix:] // prefix is shared by all names
	n := min(len(rest), keyBytes)
	var k uint64
	for _, b := range []byte(rest[:n]) {
		k = k<<8 | uint64(b)
	}
	return k << (8 * (keyBytes - n))
}

func commonPrefix(clusters []Cluster) int {
	first := clusters[0].Name
	n := len(first)
	for i := 1; i < len(clusters) && n > 0; i++ {
		name := clusters[i].Name
		if len(name) >= n && name[:n] == first[:n] {
			continue // the usual case, one comparison instead of a loop over bytes
		}
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
