//go:build linux

package seccomp

// All uses of package unsafe in this package live in this file.

import (
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Seccomp is the raw seccomp(2) system call. ptr is passed through
// unchanged; its meaning depends on op. It returns the syscall's
// non-negative result (e.g. the listener fd for SECCOMP_FILTER_FLAG_NEW_LISTENER).
func Seccomp(op, flags uint, ptr unsafe.Pointer) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_SECCOMP, uintptr(op), uintptr(flags), uintptr(ptr))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
}

// setModeFilter loads prog with SECCOMP_SET_MODE_FILTER.
func setModeFilter(prog []bpf.RawInstruction, flags uint) (int, error) {
	if len(prog) == 0 {
		return -1, unix.EINVAL
	}
	// bpf.RawInstruction and unix.SockFilter (struct sock_filter) have the
	// same layout: {u16 code; u8 jt; u8 jf; u32 k}.
	fprog := unix.SockFprog{
		Len:    uint16(len(prog)),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	return Seccomp(unix.SECCOMP_SET_MODE_FILTER, flags, unsafe.Pointer(&fprog))
}

// GetNotifSizes asks the kernel for the sizes of the notification structs
// (SECCOMP_GET_NOTIF_SIZES).
func GetNotifSizes() (NotifSizes, error) {
	var s NotifSizes
	_, err := Seccomp(unix.SECCOMP_GET_NOTIF_SIZES, 0, unsafe.Pointer(&s))
	return s, err
}

// ioctlNotif issues one of the SECCOMP_IOCTL_NOTIF_* requests whose
// argument is a pointer. It does not allocate.
func ioctlRecv(fd int, n *Notif) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(n)))
	return e
}

// SEND and ID_VALID never block: RawSyscall skips the scheduler's
// syscall bookkeeping, ~0.1 µs per call on the hot path.
func ioctlSend(fd int, r *NotifResp) unix.Errno {
	_, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(r)))
	return e
}

func ioctlIDValid(fd int, id *uint64) unix.Errno {
	_, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(id)))
	return e
}

func ioctlAddfd(fd int, a *NotifAddfd) (int, unix.Errno) {
	r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_ADDFD, uintptr(unsafe.Pointer(a)))
	return int(r), e
}

// ioctlSetFlags passes flags by value, as SECCOMP_IOCTL_NOTIF_SET_FLAGS
// expects.
func ioctlSetFlags(fd int, flags uint64) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, uintptr(flags))
	return e
}
