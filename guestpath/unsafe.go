package guestpath

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// utimens is utimensat(2) with a times pointer already in kbox's memory
// (or 0 for now).
func utimens(dirfd int, name string, tsp uintptr, flags int) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, en := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), tsp, uintptr(flags), 0, 0)
	if en != 0 {
		return en
	}
	return nil
}
