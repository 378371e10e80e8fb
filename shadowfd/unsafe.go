package shadowfd

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ptr passes a buffer to LKL by address.
func ptr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// openat is openat(2) with a NUL-terminated name the caller provides, so
// that no C string is allocated.
func openat(dirfd int, name *byte, flags int) (int, error) {
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(name)), uintptr(flags), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}
