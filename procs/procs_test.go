package procs

import (
	"runtime"
	"testing"
)

// TestParkAddsProcs: each parked thread adds a P at once; Ps go back once
// the parked threads are half the Ps added or fewer, and all of them when
// none is parked.
func TestParkAddsProcs(t *testing.T) {
	b := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(b)
	steps := []struct {
		d, want int // Park (1) or Unpark (-1), then the Ps added
	}{
		{1, 1}, {1, 2}, {1, 3}, {1, 4},
		{-1, 4}, {-1, 2}, // 3 parked of 4 added: kept; 2: halved
		{1, 3},
		{-1, 3}, {-1, 1}, {-1, 0},
		{-1, 0}, // an Unpark too many changes nothing
	}
	for i, s := range steps {
		if s.d > 0 {
			Park()
		} else {
			Unpark()
		}
		if got, procs := Extra(), runtime.GOMAXPROCS(0); got != s.want || procs != b+s.want {
			t.Fatalf("step %d: %d Ps added, GOMAXPROCS %d; want %d and %d", i+1, got, procs, s.want, b+s.want)
		}
	}
}

// TestParkBounded: a guest of many threads adds at most maxExtra Ps.
func TestParkBounded(t *testing.T) {
	b := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(b)
	for range maxExtra + 10 {
		Park()
	}
	if got := runtime.GOMAXPROCS(0); got != b+maxExtra {
		t.Errorf("GOMAXPROCS %d with %d parked, want %d", got, maxExtra+10, b+maxExtra)
	}
	for range maxExtra + 10 {
		Unpark()
	}
	if got := runtime.GOMAXPROCS(0); got != b {
		t.Errorf("GOMAXPROCS %d with none parked, want %d", got, b)
	}
}
