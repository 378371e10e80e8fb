//go:build lkl

package lkl

/*
#include "lkl_glue.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func useCred(c *Cred) error {
	if c == nil {
		C.kbox_cred_want(0, 0, 0, 0, 0, nil)
		return nil
	}
	var g *C.uint
	if len(c.Groups) > 0 {
		g = (*C.uint)(&c.Groups[0])
	}
	if r := C.kbox_cred_want(C.ulonglong(c.id), C.uint(c.FSUID), C.uint(c.FSGID), C.ulonglong(c.CapEff), C.uint(len(c.Groups)), g); r < 0 {
		return unix.Errno(-r)
	}
	return nil
}

func rootBegin() { C.kbox_cred_root_begin() }

func rootEnd() { C.kbox_cred_root_end() }

func appliedCred() uint64 { return uint64(C.kbox_cred_applied()) }

func credSlot() *uint64 { return (*uint64)(unsafe.Pointer(C.kbox_cred_slot())) }
