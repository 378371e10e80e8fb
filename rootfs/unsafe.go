package rootfs

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// unsafePointer passes a Timespec or an Rlimit to an LKL syscall by address.
func unsafePointer[T unix.Timespec | unix.Rlimit](v *T) unsafe.Pointer { return unsafe.Pointer(v) }
