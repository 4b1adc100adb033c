package placement

// radixSort sorts keys in place, using scratch (at least as long) as the second buffer. It is a
// least-significant-byte-first radix sort that skips the bytes all keys share, which for the keys
// this package builds (small counts and indexes packed into 64 bits) leaves one to three passes:
// several times faster than a comparison sort over a large fleet.
//
// The keys must already be in order of their low `sorted` bits (a multiple of 8; 0 for any
// keys), as keys ending in their own position are: the sort being stable, passes over the higher
// bytes alone complete it, which saves the passes over the position.
func radixSort(keys, scratch []uint64, sorted uint) {
	if len(keys) < 64 {
		insertionSort(keys)
		return
	}
	var and, or uint64 = ^uint64(0), 0
	for _, k := range keys {
		and &= k
		or |= k
	}
	varying := and ^ or // bits that differ between keys
	src, dst := keys, scratch[:len(keys)]
	for shift := sorted; shift < 64; shift += 8 {
		if (varying>>shift)&0xff == 0 {
			continue
		}
		var count [256]int
		for _, k := range src {
			count[(k>>shift)&0xff]++
		}
		pos := 0
		for b := range count {
			count[b], pos = pos, pos+count[b]
		}
		for _, k := range src {
			b := (k >> shift) & 0xff
			dst[count[b]] = k
			count[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &keys[0] {
		copy(keys, src)
	}
}

func insertionSort(keys []uint64) {
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
}
