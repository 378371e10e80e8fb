// The io family's vectored forms (FamIO in table.go).

package dispatch

import (
	"encoding/binary"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// Vectored I/O and fallocate on virtual fds. Host fds never get here: the
// filter lets these run natively below the virtual fd base.

// iovMax is the kernel's IOV_MAX; maxVecIO bounds one call's transfer, as
// read and write do (a short count is a valid answer).
const (
	iovMax   = 1024
	maxVecIO = 1 << 20
)

type iovec struct{ base, len uint64 }

// readIovecs reads iovcnt struct iovec from the guest, clipping the total
// to maxVecIO.
func readIovecs(r *Request, addr uint64, iovcnt uint64) ([]iovec, uint64, unix.Errno) {
	if iovcnt > iovMax {
		return nil, 0, unix.EINVAL
	}
	raw := make([]byte, 16*iovcnt)
	if err := r.G.Read(addr, raw); err != nil {
		return nil, 0, unix.EFAULT
	}
	iov := make([]iovec, 0, iovcnt)
	var total uint64
	for i := uint64(0); i < iovcnt; i++ {
		v := iovec{binary.LittleEndian.Uint64(raw[16*i:]), binary.LittleEndian.Uint64(raw[16*i+8:])}
		if int64(v.len) < 0 {
			return nil, 0, unix.EINVAL
		}
		if total+v.len > maxVecIO {
			v.len = maxVecIO - total
		}
		total += v.len
		iov = append(iov, v)
	}
	return iov, total, 0
}

// vecIO serves readv/writev and their positioned forms with one LKL
// read or write through a bounce buffer. off < 0 means the file position.
func vecIO(r *Request, write bool, off int64) Result {
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	if v, hfd, isVar := varOf(r, r.Args[0]); isVar {
		return varVecIO(r, v, hfd, write, off) // procfs.Var
	}
	lfd, en := vfd(r, r.Args[0])
	if en != 0 {
		return errno(en, LKL)
	}
	iov, total, en := readIovecs(r, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, LKL)
	}
	buf := make([]byte, total)
	if write {
		at := uint64(0)
		for _, v := range iov {
			if err := r.G.Read(v.base, buf[at:at+v.len]); err != nil {
				return errno(unix.EFAULT, LKL)
			}
			at += v.len
		}
	}
	nr, pos := lkl.SysRead, uintptr(0)
	switch {
	case write && off >= 0:
		nr, pos = lkl.SysPwrite64, uintptr(off)
	case off >= 0:
		nr, pos = lkl.SysPread64, uintptr(off)
	case write:
		nr = lkl.SysWrite
	}
	res, le := lkl.Syscall6(uintptr(nr), uintptr(lfd), uptr(buf), uintptr(len(buf)), pos, 0, 0)
	if le != 0 {
		return errno(le, LKL)
	}
	if !write {
		left := buf[:res]
		for _, v := range iov {
			if len(left) == 0 {
				break
			}
			n := min(uint64(len(left)), v.len)
			if err := r.G.Write(v.base, left[:n]); err != nil {
				// As on Linux: the segments before the fault count,
				// the rest stays to be read.
				done := int64(res) - int64(len(left))
				if off < 0 {
					unread(lfd, int64(len(left)))
				}
				if done == 0 {
					return errno(unix.EFAULT, LKL)
				}
				return ok(done, LKL)
			}
			left = left[n:]
		}
	}
	return ok(int64(res), LKL)
}

// sysReadv serves readv(2) on virtual fds.
func sysReadv(e *Engine, r *Request) Result { return vecIO(r, false, -1) }

// sysWritev serves writev(2) on virtual fds.
func sysWritev(e *Engine, r *Request) Result { return vecIO(r, true, -1) }

// positioned forms: a negative offset is EINVAL for preadv/pwritev; for
// the *v2 forms -1 means the file position, and RWF_* flags are refused.
func posVecIO(r *Request, write, v2 bool) Result {
	off := int64(r.Args[3])
	switch {
	case v2 && r.Args[5] != 0:
		if !isVirtual(r, r.Args[0]) {
			return cont
		}
		return errno(unix.EOPNOTSUPP, LKL)
	case v2 && off == -1:
	case off < 0:
		return errno(unix.EINVAL, LKL)
	}
	return vecIO(r, write, off)
}

// sysPreadv serves preadv(2) on virtual fds.
func sysPreadv(e *Engine, r *Request) Result { return posVecIO(r, false, false) }

// sysPwritev serves pwritev(2) on virtual fds.
func sysPwritev(e *Engine, r *Request) Result { return posVecIO(r, true, false) }

// sysPreadv2 serves preadv2(2) on virtual fds.
func sysPreadv2(e *Engine, r *Request) Result { return posVecIO(r, false, true) }

// sysPwritev2 serves pwritev2(2) on virtual fds.
func sysPwritev2(e *Engine, r *Request) Result { return posVecIO(r, true, true) }
