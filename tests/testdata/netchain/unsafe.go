//go:build lkl

package main

import "unsafe"

// buf returns n bytes on the heap, whose address goes to lkl_syscall or
// the host as a uintptr: Go moves a goroutine's stack when it grows, and
// a buffer of a constant size that does not escape would be on it. Kept
// from inlining, so that the result always escapes.
//
//go:noinline
func buf(n int) []byte { return make([]byte, n) }

// ptr is the address of the first byte of b, a buffer from buf (b stays
// alive: KeepAlive).
func ptr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }
