//go:build lkl

package lkl

/*
#include <stdlib.h>
#include <string.h>
#include "lkl_glue.h"
*/
import "C"

import "unsafe"

// diskAddFaulty hands C a copy of ranges (first, last sector, ops
// triples) in C memory.
func diskAddFaulty(fd int, ranges []uint64) int {
	n := len(ranges) / 3
	p := C.calloc(C.size_t(len(ranges)+3), 8)
	if p == nil {
		return -12 // ENOMEM
	}
	defer C.free(p)
	copy(unsafe.Slice((*uint64)(p), len(ranges)), ranges)
	return int(C.kbox_lkl_disk_add_faulty(C.int(fd), (*C.ulonglong)(p), C.int(n)))
}

func diskFailed(id int) uint64 { return uint64(C.kbox_lkl_disk_failed(C.int(id))) }
