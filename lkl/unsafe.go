package lkl

import "unsafe"

// Addresses given to LKL.
//
// LKL's syscalls take pointers as integers (Syscall6's uintptr
// arguments), and the call into LKL is Go code, then a cgo call. A
// goroutine's stack moves when it grows, and it may grow anywhere on the
// way: an address into a stack, taken before the call, could be stale by
// the time LKL writes through it, and LKL would write into freed stack.
// unsafe.Pointer's rule 4 allows uintptr arguments only for
// syscall.Syscall, whose conversion the compiler sees.
//
// So every address LKL receives comes from Ptr or PtrOf, whose argument
// always escapes to the heap: the store to escapeSink is never made, but
// escape analysis does not look at the condition, so the compiler puts a
// buffer that would have been on the stack on the heap instead, and heap
// memory never moves. Callers keep the buffer alive across the call
// (runtime.KeepAlive) as for any uintptr. Hot paths pass pooled buffers,
// which are on the heap anyway, so they do not allocate
// (TestDispatchAllocs).

var (
	escapeNever bool
	escapeSink  any
)

// Ptr returns the address of b's first byte for an LKL call (0 for an
// empty b). b is on the heap.
func Ptr(b []byte) uintptr {
	if escapeNever {
		escapeSink = b
	}
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

// PtrOf returns the address of *v for an LKL call. *v is on the heap.
func PtrOf[T any](v *T) uintptr {
	if escapeNever {
		escapeSink = v
	}
	return uintptr(unsafe.Pointer(v))
}
