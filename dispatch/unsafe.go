package dispatch

import (
	"runtime"
	"unsafe"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// uptr passes a buffer to a syscall (LKL's or the host's) by address: b
// is on the heap, which never moves (lkl.Ptr says why); callers keep it
// alive across the call.
func uptr(b []byte) uintptr { return lkl.Ptr(b) }

// asBytes views a fixed-size value as bytes, for copying ABI structs to the
// guest.
func asBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// keepTimes keeps ts alive across an LKL call that received its address.
func keepTimes(ts *[2]unix.Timespec) { runtime.KeepAlive(ts) }

// schedGetaffinity is sched_getaffinity(2) of the calling thread into set,
// with the length the guest gave: the kernel checks it and returns the
// size it fills.
func schedGetaffinity(n uint64, set *unix.CPUSet) (int, unix.Errno) {
	size, _, en := unix.RawSyscall(unix.SYS_SCHED_GETAFFINITY, 0, uintptr(n), uintptr(unsafe.Pointer(set)))
	return int(size), en
}

// rawBind is bind(2) of fd to the raw address a.
func rawBind(fd int, a []byte) unix.Errno {
	_, _, en := unix.Syscall(unix.SYS_BIND, uintptr(fd), uptr(a), uintptr(len(a)))
	runtime.KeepAlive(a)
	return en
}

// rawConnect is connect(2) of fd to the raw address a, retried when a
// signal of kbox's own runtime interrupts it.
func rawConnect(fd int, a []byte) unix.Errno {
	for {
		_, _, en := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uptr(a), uintptr(len(a)))
		if en != unix.EINTR {
			runtime.KeepAlive(a)
			return en
		}
	}
}

// rawSendmsg is sendmsg(2) on fd of data with control data oob to the raw
// address name (none when empty).
func rawSendmsg(fd int, data, oob, name []byte, flags int) (int, unix.Errno) {
	var iov unix.Iovec
	var msg unix.Msghdr
	if len(data) > 0 {
		iov.Base = &data[0]
		iov.SetLen(len(data))
		msg.Iov = &iov
		msg.SetIovlen(1)
	}
	if len(oob) > 0 {
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
	}
	if len(name) > 0 {
		msg.Name = &name[0]
		msg.Namelen = uint32(len(name))
	}
	n, _, en := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), uintptr(flags))
	runtime.KeepAlive(data)
	runtime.KeepAlive(oob)
	runtime.KeepAlive(name)
	if en != 0 {
		return -1, en
	}
	return int(n), 0
}

// sockNamed reports whether socket fd has a name (bound, or autobound):
// getsockname gives more than the family.
func sockNamed(fd int) bool {
	var a unix.RawSockaddrAny
	l := uint32(unsafe.Sizeof(a))
	_, _, en := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&a)), uintptr(unsafe.Pointer(&l)))
	return en == 0 && l > 2
}

// internNew copies b (not empty) into one allocation, its length in the
// first 8 bytes and then its bytes, for the intern table (mem.go): it
// returns the allocation's start, which the table keeps, and the string
// its bytes make, which is never written again.
func internNew(b []byte) (*byte, string) {
	buf := make([]byte, 8+len(b), (8+len(b)+7)&^7) // a multiple of 8: the length is aligned
	*(*uint64)(unsafe.Pointer(&buf[0])) = uint64(len(b))
	copy(buf[8:], b)
	return &buf[0], unsafe.String(&buf[8], len(b))
}

// internedString is the string of an allocation internNew made.
func internedString(p *byte) string {
	n := *(*uint64)(unsafe.Pointer(p))
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(p), 8)), int(n))
}

// viewString views b as a string without copying, for a lookup that
// keeps nothing of it (b changes after).
func viewString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// emptyName is the empty path of statx(fd, "", AT_EMPTY_PATH).
var emptyName = [1]byte{}

// fdStatx is statx(2) of host fd fd itself (AT_EMPTY_PATH), without the
// allocation unix.Statx makes of its path.
func fdStatx(fd, flags, mask int, sx *unix.Statx_t) error {
	_, _, e := unix.Syscall6(unix.SYS_STATX, uintptr(fd), uintptr(unsafe.Pointer(&emptyName[0])),
		uintptr(flags|unix.AT_EMPTY_PATH), uintptr(mask), uintptr(unsafe.Pointer(sx)), 0)
	if e != 0 {
		return e
	}
	return nil
}
