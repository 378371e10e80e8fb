package shadowfd

import (
	"runtime"
	"unsafe"

	"github.com/kbox-project/kbox/lkl"

	"golang.org/x/sys/unix"
)

// openat is openat(2) with a NUL-terminated name the caller provides, so
// that no C string is allocated.
//
// A raw syscall, without the scheduler's hand-off (about 100 ns): it opens
// a content file, in the store's tmpfs or a memfd, which never waits.
func openat(dirfd int, name *byte, flags int) (int, error) {
	fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(name)), uintptr(flags), 0, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// statPath is stat(2) of a NUL-terminated path the caller provides, so that
// no C string is allocated.
func statPath(path *byte, st *unix.Stat_t) error {
	_, _, e := unix.Syscall6(unix.SYS_NEWFSTATAT, uintptr(atFdcwd), uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(st)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// atFdcwd is AT_FDCWD as a variable: the constant is negative.
var atFdcwd = unix.AT_FDCWD

// lklFutimens sets the times of LKL fd fd (utimensat with a NULL path).
func lklFutimens(fd int, ts *[2]unix.Timespec) unix.Errno {
	_, le := lkl.Syscall6(lkl.SysUtimensat, uintptr(fd), 0, lkl.PtrOf(ts), 0, 0, 0)
	runtime.KeepAlive(ts)
	return le
}

// futimens sets the times of host fd fd (utimensat with a NULL path).
func futimens(fd int, ts *[2]unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}
