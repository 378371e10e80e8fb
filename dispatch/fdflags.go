package dispatch

import (
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// setflMask are the file status flags F_SETFL changes on a virtual fd; the
// LKL open file holds them (so dups and forked copies share them, as file
// descriptions do). O_ASYNC is not among them: SIGIO from LKL could not
// reach the guest.
const setflMask = unix.O_APPEND | unix.O_NONBLOCK | unix.O_NOATIME | unix.O_DIRECT

// openOnly are open flags that F_GETFL never reports.
const openOnly = unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_TRUNC | unix.O_CLOEXEC

// getfl returns a virtual fd's F_GETFL: the access mode and other open
// flags it was opened with (the LKL fd may be O_RDWR for an O_WRONLY
// open), and the status flags as LKL has them now.
func getfl(lfd, openFlags int) int {
	fl := openFlags &^ (openOnly | setflMask)
	v, le := lkl.Syscall6(lkl.SysFcntl, uintptr(lfd), unix.F_GETFL, 0, 0, 0, 0)
	if le != 0 {
		return fl | openFlags&setflMask
	}
	return fl | int(lkl.OpenFlagsFromLKL(uint32(v)))&setflMask
}

// setfl sets the status flags of a virtual fd's LKL file to those of
// flags in setflMask; the rest of flags is ignored, as by Linux.
func setfl(lfd, flags int) unix.Errno {
	_, le := lkl.Syscall6(lkl.SysFcntl, uintptr(lfd), unix.F_SETFL, uintptr(lkl.OpenFlagsToLKL(uint32(flags&setflMask))), 0, 0, 0)
	return le
}
