//go:build lkl

package lkl

/*
#include <stdlib.h>
#include "lkl_glue.h"
*/
import "C"

import "unsafe"

// COWMap is a copy-on-write disk's dirty-block bitmap, in C memory: the
// disk's request handler sets bits in it from LKL's threads.
type COWMap struct {
	p    unsafe.Pointer
	n    int
	size int64
}

// NewCOWMap allocates the zeroed map of a disk of size bytes.
func NewCOWMap(size int64) *COWMap {
	n := int(C.kbox_cow_map_len(C.ulonglong(size)))
	return &COWMap{p: C.calloc(C.size_t(n+1), 1), n: n, size: size}
}

// bytes views the map; read it only once the disk is unmounted.
func (m *COWMap) bytes() []byte { return unsafe.Slice((*byte)(m.p), m.n) }

// Free releases the map; the disk must be removed (or the kernel halted).
func (m *COWMap) Free() {
	if m != nil && m.p != nil {
		C.free(m.p)
		m.p = nil
	}
}

func diskAddCOW(base, over int, size int64, dirty *COWMap) int {
	return int(C.kbox_lkl_disk_add_cow(C.int(base), C.int(over), C.ulonglong(size), (*C.uchar)(dirty.p)))
}
