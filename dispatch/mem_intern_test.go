package dispatch

import (
	"strings"
	"testing"
)

// intern keeps its own copy of each string, whatever its length, and an
// earlier copy comes back without an allocation.
func TestIntern(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 100, 4095} {
		want := strings.Repeat("p", n)
		b := []byte(want)
		got := intern(b)
		for i := range b {
			b[i] = 'x' // the caller's buffer is reused
		}
		if got != want {
			t.Fatalf("intern of %d bytes: %q", n, got)
		}
		b = []byte(want)
		if a := testing.AllocsPerRun(50, func() { got = intern(b) }); a != 0 || got != want {
			t.Errorf("intern of %d bytes again: %v allocations, %q", n, a, got)
		}
	}
}
