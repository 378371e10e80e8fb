package dispatch

import (
	"runtime"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// cpath returns p as a NUL-terminated byte slice.
func cpath(p string) []byte {
	b := make([]byte, len(p)+1)
	copy(b, p)
	return b
}

func lklClose(fd int) { lkl.Close(fd) }

// lklPath calls LKL syscall nr with a path argument at position pos (0-5);
// the other arguments are as given.
func lklPath(nr uintptr, pos int, p string, a [6]uintptr) (uintptr, unix.Errno) {
	sc := getScratch()
	b := sc.cstring(p)
	a[pos] = uptr(b)
	r, e := lkl.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	runtime.KeepAlive(b)
	putScratch(sc)
	return r, e
}

// lklPath2 calls LKL syscall nr with path arguments at positions i and j.
func lklPath2(nr uintptr, i int, p string, j int, q string, a [6]uintptr) (uintptr, unix.Errno) {
	b, c := cpath(p), cpath(q)
	a[i], a[j] = uptr(b), uptr(c)
	r, e := lkl.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
	return r, e
}

const atFdcwd = uintptr(0xffffffffffffff9c) // AT_FDCWD (-100)

// kprocPath calls LKL syscall nr with path rel beneath LKL's proc (at
// argument pos, its dirfd at pos-1); the other arguments are as given.
func (e *Engine) kprocPath(nr uintptr, pos int, rel string, a [6]uintptr) (uintptr, unix.Errno) {
	if !e.Opt.HasKernelProc {
		return 0, unix.ENOENT
	}
	a[pos-1] = uintptr(e.Opt.KernelProc)
	return lklPath(nr, pos, rel, a)
}
