//go:build lkl

package lkl

import (
	"os"
	"testing"
)

// TestPrefault: the ends of the kernel's memory that boot writes first
// (glue.c's prefault: 3 MB at the bottom, 2 MB at the top, 4 MB from
// 128M on) are resident before the kernel runs, each end made in one
// call instead of a fault a page, and nothing between them is.
func TestPrefault(t *testing.T) {
	for _, c := range []struct {
		mb, ends int // the memory's size, the pages populated (MiB)
	}{
		{8, 0}, // too small: left to boot's faults
		{32, 5},
		{64, 5},
		{128, 7},
		{512, 7},
	} {
		ends, middle, ok := prefaultCheck(c.mb << 20)
		if !ok {
			t.Fatalf("%dM: cannot map or read residency", c.mb)
		}
		if want := c.ends << 20 / os.Getpagesize(); ends != want || middle != 0 {
			t.Errorf("%dM: %d pages resident at the ends (want %d), %d between them (want 0)", c.mb, ends, want, middle)
		}
	}
}
