//go:build lkl

package lkl

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -l:liblkl.a -lpthread -lrt -Wl,-z,noexecstack
#include <stdlib.h>
#include "lkl_glue.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Available reports whether this binary links liblkl.
const Available = true

// APIGeneration reports which LKL entry points the linked liblkl has: 1 for
// lkl_start_kernel(ops, cmdline), 2 for lkl_init + lkl_start_kernel(cmdline).
func APIGeneration() int { return int(C.kbox_lkl_api_generation()) }

func boot(cmdline string, echo bool) error {
	C.kbox_lkl_low_memory()
	C.kbox_lkl_own_timer()
	C.kbox_lkl_own_sync()
	e := C.int(0)
	if echo {
		e = 1
	}
	C.kbox_lkl_console(e)
	cs := C.CString(cmdline)
	defer C.free(unsafe.Pointer(cs))
	if r := C.kbox_lkl_boot(cs); r < 0 {
		return fmt.Errorf("lkl: start kernel (%q): %w", cmdline, unix.Errno(-r))
	}
	return nil
}

// syncSpins is how many times a waiter on the kernel's locks pauses
// before it sleeps (sync.c): 0 on one CPU, -1 if LKL's own operations
// are in use.
func syncSpins() int { return int(C.kbox_lkl_sync_spins()) }

// prefaultCheck maps size bytes, prefaults them as the kernel's memory
// is at boot (glue.c), and counts the pages resident at its ends and
// elsewhere, and the kB of them in huge pages; ok false if it could not
// map them.
func prefaultCheck(size int) (ends, middle, hugeKB int, ok bool) {
	var e, m, h C.long
	r := C.kbox_lkl_prefault_check(C.ulong(size), &e, &m, &h)
	return int(e), int(m), int(h), r == 0
}

// hugeRest is glue.c's huge_rest on the kernel's memory: the offset from
// which it asks for huge pages, or -1.
func hugeRest() int64 { return int64(C.kbox_lkl_huge_rest()) }

// hugeRestCheck maps size bytes, prefaults them as the kernel's memory is
// at boot, writes a byte at each offset of wrote, applies huge_rest, then
// writes a byte at each offset of touch; it returns huge_rest's answer and
// the kB of the mapping in huge pages, ok false if it could not map.
func hugeRestCheck(size int, wrote, touch []uint64) (from int64, hugeKB int, ok bool) {
	w := make([]C.ulong, len(wrote)+1)
	for i, v := range wrote {
		w[i] = C.ulong(v)
	}
	t := make([]C.ulong, len(touch)+1)
	for i, v := range touch {
		t[i] = C.ulong(v)
	}
	var h C.long
	r := C.kbox_lkl_huge_rest_check(C.ulong(size), &w[0], C.int(len(wrote)), &t[0], C.int(len(touch)), &h)
	return int64(r), int(h), r != -2
}

func shutdown() { C.kbox_lkl_shutdown() }

func setStarting(on bool) {
	v := C.int(0)
	if on {
		v = 1
	}
	C.kbox_lkl_starting(v)
}

func markRestarted() { C.kbox_lkl_restarted() }

func panicKernel() { C.kbox_lkl_panic() }

func diskAdd(fd int) int { return int(C.kbox_lkl_disk_add(C.int(fd))) }

func mountDev(id, part int, fstype string, flags uintptr, opts string) (string, error) {
	cfs := C.CString(fstype)
	defer C.free(unsafe.Pointer(cfs))
	var copts *C.char
	if opts != "" {
		copts = C.CString(opts)
		defer C.free(unsafe.Pointer(copts))
	}
	var buf [256]C.char
	r := C.kbox_lkl_mount_dev(C.uint(id), C.uint(part), cfs, C.int(flags), copts, &buf[0], C.uint(len(buf)))
	if r < 0 {
		return "", unix.Errno(-r)
	}
	return C.GoString(&buf[0]), nil
}

func diskRemove(id int) int { return int(C.kbox_lkl_disk_remove(C.int(id))) }

func hurry(ns int64) { C.kbox_lkl_hurry(C.ulong(ns)) }

func umountDev(id, part int, timeoutMs int) int {
	return int(C.kbox_lkl_umount_dev(C.uint(id), C.uint(part), 0, C.long(timeoutMs)))
}

func blockDev(id, part int) (uint64, int) {
	var dev C.uint
	r := C.kbox_lkl_blkdev(C.uint(id), C.uint(part), &dev)
	return uint64(dev), int(r)
}

func syscall6(nr, a1, a2, a3, a4, a5, a6 int64) int64 {
	return int64(C.kbox_lkl_syscall6(C.long(nr), C.long(a1), C.long(a2), C.long(a3), C.long(a4), C.long(a5), C.long(a6)))
}
