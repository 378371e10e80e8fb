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

func diskAddCOW(base int, size int64, layers []COWLayer) int {
	h := C.kbox_cow_new(C.int(base), C.ulonglong(size))
	if h == nil {
		return -12 // ENOMEM
	}
	for _, l := range layers {
		if e := C.kbox_cow_push(h, C.int(l.FD), (*C.uchar)(l.Map.p)); e < 0 {
			C.kbox_cow_free(h)
			return int(e)
		}
	}
	return int(C.kbox_lkl_disk_add_cow(h))
}

func diskPushCOW(id, fd int, m *COWMap) int {
	return int(C.kbox_lkl_disk_push_cow(C.int(id), C.int(fd), (*C.uchar)(m.p)))
}

func diskCOWRun(id int, off, n int64) (int, int64) {
	var run C.ulonglong
	fd := C.kbox_lkl_disk_cow_run(C.int(id), C.ulonglong(off), C.ulonglong(n), &run)
	return int(fd), int64(run)
}
