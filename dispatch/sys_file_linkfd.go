package dispatch

import (
	"strconv"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// A name for an open file: linkat(fd, "", AT_EMPTY_PATH), and linkat of
// /proc/self/fd/N or /dev/fd/N with AT_SYMLINK_FOLLOW (open(2)'s way of
// giving an O_TMPFILE file a name). The fd is a shadow or a virtual fd,
// so its file is an LKL file kbox holds: LKL links that file itself,
// through its own /proc/self/fd/N (as Linux does, no capability asked)
// or, for AT_EMPTY_PATH or without LKL's /proc, by the fd
// (CAP_DAC_READ_SEARCH, which LKL checks with the guest's credentials).
// An fd with no LKL file (a pipe, a bind's file) is left to twoPaths.

// linkFd serves linkat of an fd's file; done is false when the call is
// not one, or the fd has no LKL file.
func (e *Engine) linkFd(r *Request, d1 int32, a1 uint64, d2 int32, a2 uint64, flags uintptr) (Result, bool) {
	if flags&^(unix.AT_EMPTY_PATH|unix.AT_SYMLINK_FOLLOW) != 0 {
		return Result{}, false // LKL's EINVAL
	}
	var fd int
	empty := false
	if flags&unix.AT_EMPTY_PATH != 0 {
		p, en := readPath(r, a1)
		empty = en == 0 && p == ""
	}
	switch {
	case empty:
		if d1 == unix.AT_FDCWD {
			// The cwd: a directory, which is no link's (EPERM), for a
			// caller that may link by fd at all.
			if r.P.creds().Has(capDacReadSearch) {
				return errno(unix.EPERM, Emulated), true
			}
			return errno(unix.ENOENT, Emulated), true
		}
		fd = int(d1)
	case flags&unix.AT_SYMLINK_FOLLOW != 0:
		t, en := e.target(r, d1, a1)
		switch {
		case en != 0:
			return Result{}, false
		case t.Fd > 0:
			fd = t.Fd - 1 // /dev/fd/N
		case t.Proc != nil && t.Proc.Fd != nil:
			ref := t.Proc.Fd // /proc/PID/fd/N, found for the caller
			if ref.LKLFd < 0 {
				return Result{}, false
			}
			return e.linkLKL(r, ref, d2, a2, false), true
		default:
			return Result{}, false
		}
	default:
		return Result{}, false
	}
	ref, en := e.fdRefOf(r.P.Tgid, fd)
	switch {
	case en != 0 && empty:
		return errno(unix.EBADF, Emulated), true
	case en != 0:
		return errno(unix.ENOENT, Emulated), true
	case ref.LKLFd < 0:
		return Result{}, false
	}
	return e.linkLKL(r, ref, d2, a2, empty), true
}

// linkLKL gives ref's LKL file the new name at d2/a2, an image path. A
// policy judges the file by its path as it judges link(2)'s old path: a
// read-only file gets no second, writable name.
func (e *Engine) linkLKL(r *Request, ref *procfs.FdRef, d2 int32, a2 uint64, emptyPath bool) Result {
	if en := e.policyFdFile(r, ref); en != 0 { // policy.go
		return errno(en, Denied)
	}
	lklfd := ref.LKLFd
	t2, res, okk := e.modTarget(r, d2, a2)
	if !okk {
		return res
	}
	if !t2.Plain() {
		return errno(unix.EXDEV, Emulated) // a bind, a route: another filesystem
	}
	var le unix.Errno
	if emptyPath || !e.Opt.HasKernelProc {
		_, le = lklPath2(lkl.SysLinkat, 1, "", 3, t2.LKLPath(), [6]uintptr{uintptr(lklfd), 0, atFdcwd, 0, unix.AT_EMPTY_PATH})
	} else {
		_, le = lklPath2(lkl.SysLinkat, 1, "self/fd/"+strconv.Itoa(lklfd), 3, t2.LKLPath(),
			[6]uintptr{uintptr(e.Opt.KernelProc), 0, atFdcwd, 0, unix.AT_SYMLINK_FOLLOW})
	}
	if le != 0 {
		return errno(le, LKL)
	}
	return ok(0, LKL)
}
