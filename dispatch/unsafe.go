package dispatch

import (
	"runtime"
	"unsafe"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// uptr passes a Go buffer to LKL by address; callers keep it alive.
func uptr(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

// asBytes views a fixed-size value as bytes, for copying ABI structs to the
// guest.
func asBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

func unsafeStat(st *lkl.Stat64) unsafe.Pointer      { return unsafe.Pointer(st) }
func unsafeStatfs(sf *unix.Statfs_t) unsafe.Pointer { return unsafe.Pointer(sf) }

func unsafeSysinfo(si *unix.Sysinfo_t) unsafe.Pointer { return unsafe.Pointer(si) }

func unsafeTimes(ts *[2]unix.Timespec) unsafe.Pointer { return unsafe.Pointer(ts) }

// keepTimes keeps ts alive across an LKL call that received its address.
func keepTimes(ts *[2]unix.Timespec) { runtime.KeepAlive(ts) }

// schedGetaffinity is sched_getaffinity(2) of the calling thread into set,
// with the length the guest gave: the kernel checks it and returns the
// size it fills.
func schedGetaffinity(n uint64, set *unix.CPUSet) (int, unix.Errno) {
	size, _, en := unix.RawSyscall(unix.SYS_SCHED_GETAFFINITY, 0, uintptr(n), uintptr(unsafe.Pointer(set)))
	return int(size), en
}
