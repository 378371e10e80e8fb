package rootfs

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// unsafePointer passes a Timespec to an LKL syscall by address.
func unsafePointer(ts *unix.Timespec) unsafe.Pointer { return unsafe.Pointer(ts) }
