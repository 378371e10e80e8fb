package loopdev

import (
	"encoding/binary"
	"runtime"
	"time"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Backing returns the LKL device number of the filesystem of the file
// behind loop device lfd (an LKL fd; lo_device of LOOP_GET_STATUS64); ok
// is false for an unbound device.
func Backing(lfd int) (dev uint64, ok bool) {
	buf := make([]byte, sizeInfo64)
	_, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), GetStatus64, lkl.Ptr(buf), 0, 0, 0)
	runtime.KeepAlive(buf)
	if le != 0 {
		return 0, false
	}
	return binary.NativeEndian.Uint64(buf[li64Device:]), true
}

// Cleared reports a loop device with no file and no size left (the
// driver's clear has run to its end: unbound before its size is 0).
func Cleared(lfd int) bool {
	if _, bound := Backing(lfd); bound {
		return false
	}
	size := make([]byte, 8)
	_, le := lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), unix.BLKGETSIZE64, lkl.Ptr(size), 0, 0, 0)
	runtime.KeepAlive(size)
	return le != 0 || binary.NativeEndian.Uint64(size) == 0
}

// AwaitClear follows a LOOP_CLR_FD on loop device lfd. The driver defers
// the clear (to the last close) while another opener holds the device,
// and in LKL that may be the guest's own earlier close or unmount,
// released a clock tick later: the clear is asked again until it is done,
// for at most wait, so that the device is free when losetup -d returns,
// as on Linux. A real other opener keeps it deferred, as on Linux.
func AwaitClear(lfd int, wait time.Duration) {
	deadline := time.Now().Add(wait)
	for !Cleared(lfd) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		lkl.Syscall6(lkl.SysIoctl, uintptr(lfd), ClrFd, 0, 0, 0, 0)
	}
}
