package dispatch

import (
	"os"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/guestpath"
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
// A host file in a bind gets a name in the same bind (linkHost). An fd
// of anything else (a pipe, a file outside the binds) is left to
// twoPaths: EXDEV or ENOENT.

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
				if ref.Host == "" {
					return Result{}, false
				}
				hfd, err := unix.Open(ref.Host, unix.O_PATH|unix.O_CLOEXEC, 0)
				if err != nil {
					return Result{}, false
				}
				return e.linkHost(r, ref, hfd, d2, a2)
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
		if empty && !r.P.creds().Has(capDacReadSearch) {
			return errno(unix.ENOENT, Emulated), true // Linux's check of the caller
		}
		hfd, err := r.P.getfd(fd)
		if err != nil {
			return Result{}, false
		}
		return e.linkHost(r, ref, hfd, d2, a2)
	}
	return e.linkLKL(r, ref, d2, a2, empty), true
}

// linkHost gives the host file hfd (kbox's copy of the guest's fd, or an
// O_PATH fd through its link; linkHost closes it) a name at d2/a2, when
// the file is in a bind and the name in the same one: the host kernel
// links it through hfd's own /proc link, which asks no capability (the
// caller's was checked for AT_EMPTY_PATH) and refuses a file with no name
// that was not made O_TMPFILE (ENOENT). The bind is judged by what hfd
// is, not by the guest's fd number, which another guest thread may reuse
// meanwhile. Anything else is left to twoPaths (done false).
func (e *Engine) linkHost(r *Request, ref *procfs.FdRef, hfd int, d2 int32, a2 uint64) (Result, bool) {
	defer unix.Close(hfd)
	self := guestpath.ProcFd(hfd)
	txt, err := os.Readlink(self)
	if err != nil {
		return Result{}, false
	}
	g, inBind := e.bindGuestPath(strings.TrimSuffix(txt, " (deleted)"))
	if !inBind {
		return Result{}, false
	}
	if en := e.policyFdFile(r, ref); en != 0 { // policy.go
		return errno(en, Denied), true
	}
	t2, res, okk := e.modTarget(r, d2, a2)
	switch {
	case !okk:
		return res, true
	case t2.Bind == nil || t2.Bind != e.bindOf(g):
		return errno(unix.EXDEV, Emulated), true // the image, a route or another bind
	case t2.Bind.ReadOnly:
		return errno(unix.EROFS, Host), true
	}
	dir, base, err := t2.Bind.Parent(t2.Rel)
	if err == unix.EBUSY {
		return errno(unix.EEXIST, Host), true // the bind's own directory
	}
	if err != nil {
		return fail(err, Host), true
	}
	defer unix.Close(dir)
	return hostDone(unix.Linkat(unix.AT_FDCWD, self, dir, base, unix.AT_SYMLINK_FOLLOW)), true
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
