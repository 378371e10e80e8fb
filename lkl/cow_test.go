package lkl

import (
	"reflect"
	"testing"
)

func TestDirtyRanges(t *testing.T) {
	cases := []struct {
		name string
		size int64
		set  []int64 // dirty blocks
		want [][2]int64
	}{
		{"none", 10 * COWBlock, nil, nil},
		{"one", 10 * COWBlock, []int64{3}, [][2]int64{{3 * COWBlock, 4 * COWBlock}}},
		{"merged", 10 * COWBlock, []int64{0, 1, 2, 5, 7, 8}, [][2]int64{{0, 3 * COWBlock}, {5 * COWBlock, 6 * COWBlock}, {7 * COWBlock, 9 * COWBlock}}},
		{"partial last block clipped", 3*COWBlock + 512, []int64{2, 3}, [][2]int64{{2 * COWBlock, 3*COWBlock + 512}}},
		{"across a byte of the map", 20 * COWBlock, []int64{7, 8, 9}, [][2]int64{{7 * COWBlock, 10 * COWBlock}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewCOWMap(c.size)
			defer m.Free()
			b := m.bytes()
			for _, blk := range c.set {
				b[blk/8] |= 1 << (blk % 8)
			}
			if got := m.DirtyRanges(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}
