package dispatchtest

import "unsafe"

// addrOf is the address of a mapping the Guest owns (mmap'd, never moved
// by Go's collector).
func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }
