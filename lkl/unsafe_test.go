package lkl

import "testing"

// An address given to LKL is never a stack address: a buffer that would
// have lived on the caller's stack is moved to the heap (one allocation
// here), which never moves while LKL uses it.
func TestPtrArgumentIsOnTheHeap(t *testing.T) {
	stackBuf := func() uintptr {
		var buf [64]byte
		return Ptr(buf[:])
	}
	stackStruct := func() uintptr {
		var st Stat64
		return PtrOf(&st)
	}
	for name, f := range map[string]func() uintptr{"Ptr": stackBuf, "PtrOf": stackStruct} {
		if n := testing.AllocsPerRun(100, func() { f() }); n != 1 {
			t.Errorf("%s: %v allocations per call, want 1 (the buffer moved to the heap)", name, n)
		}
	}
	heap := make([]byte, 64)
	if n := testing.AllocsPerRun(100, func() { Ptr(heap) }); n != 0 {
		t.Errorf("Ptr of a heap buffer allocates %v times", n)
	}
}
