package placement

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRadixSortMatchesSlicesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, 63, 64, 65, 1000, 4096} {
		for _, mask := range []uint64{0xff, 0xffff_0000, 0xff00_0000_0000_00ff, ^uint64(0)} {
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = r.Uint64() & mask
			}
			want := slices.Sorted(slices.Values(keys))
			radixSort(keys, make([]uint64, n), 0)
			if !slices.Equal(keys, want) {
				t.Fatalf("n=%d mask=%x: radixSort differs from slices.Sort", n, mask)
			}
		}
	}
}

func TestRadixSortSortedLowBits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 63, 64, 65, 1000, 4096} {
		for _, mask := range []uint64{0xff, 0xffff_0000, ^uint64(0)} {
			keys := make([]uint64, n)
			for i := range keys {
				keys[i] = r.Uint64()&mask<<indexBits | uint64(i) // in order of the low indexBits bits
			}
			want := slices.Sorted(slices.Values(keys))
			radixSort(keys, make([]uint64, n), indexBits)
			if !slices.Equal(keys, want) {
				t.Fatalf("n=%d mask=%x: radixSort differs with sorted low bits from slices.Sort", n, mask)
			}
		}
	}
}
