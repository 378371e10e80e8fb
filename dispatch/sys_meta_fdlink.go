package dispatch

import (
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// Changes through an fd: chmod, chown and utimensat of /proc/self/fd/N
// (or /dev/fd/N) follow the link to the fd's file, as Linux's do, and
// fchownat and utimensat with AT_EMPTY_PATH and "" change the fd's file.
// glibc's fchmodat with AT_SYMLINK_NOFOLLOW is a chmod of
// /proc/self/fd/N of an O_PATH fd, and GNU tar sets its directories'
// modes so; an O_PATH fd of a directory is a virtual fd. The change runs
// on the fd's LKL file (a virtual fd's, or a shadow's node's) through
// LKL's own /proc/self/fd, with the caller's credentials; a bind's file
// by its path. Other host files (pipes, sockets) stay out of reach
// through a link (EACCES).

// linkedTarget follows t when it is a /proc link or /dev/fd/N: to a
// guest path, or to ref, an fd's LKL file. Other targets come back as
// they are.
func (e *Engine) linkedTarget(r *Request, t guestpath.Target) (guestpath.Target, *procfs.FdRef, unix.Errno) {
	var en unix.Errno
	if t.Fd > 0 {
		if t, en = e.procFdLink(r, t); en != 0 {
			return t, nil, en
		}
	}
	if t.Proc == nil || t.Proc.Kind != procfs.Link {
		return t, nil, 0
	}
	if t, en = e.followProc(r, t); en != 0 {
		return t, nil, en
	}
	ref := (*procfs.FdRef)(nil)
	if t.Proc != nil {
		ref = t.Proc.Fd
	}
	switch {
	case ref == nil || ref.LKLFd < 0:
		return t, nil, 0
	case !e.Opt.HasKernelProc:
		// No LKL /proc to reach the inode by: its path.
		p := ref.Path
		if p == "" {
			p = strings.TrimSuffix(ref.Text, " (deleted)")
		}
		t, en = e.classifyN(r, p, 1)
		return t, nil, en
	}
	return t, ref, 0
}

// fdLinkOp runs LKL syscall nr on ref's LKL file, through LKL's
// /proc/self/fd, with rest after the path (a call that follows links).
func (e *Engine) fdLinkOp(nr uintptr, ref *procfs.FdRef, effect pathEffect, rest []uintptr) Result {
	node := ref.Node
	if node == nil && effect == setsTimes && e.Shadows.Any() {
		// A virtual fd of a file that another fd shadows.
		if st, err := lkl.Fstat(ref.LKLFd); err == nil {
			node = e.Shadows.OfInode(st.Dev, st.Ino)
		}
	}
	if node != nil && effect == setsTimes {
		if err := e.Shadows.Sync(node); err != nil {
			return fail(err, LKL)
		}
	}
	var a [6]uintptr
	copy(a[2:], rest)
	if _, le := e.kprocPath(nr, 1, "self/fd/"+strconv.Itoa(ref.LKLFd), a); le != 0 {
		return errno(le, LKL)
	}
	if node != nil && effect == setsTimes {
		e.Shadows.TimesSet(node)
	}
	return ok(0, LKL)
}

// emptyPathOp serves a change of fd's own file (AT_EMPTY_PATH and an
// empty path; AT_FDCWD: the working directory), as through its link,
// followed whatever the call's AT_SYMLINK_NOFOLLOW. A host file with no
// shadow is the host's to change, but in a read-only bind (EROFS).
func (e *Engine) emptyPathOp(r *Request, nr uintptr, fd int32, effect pathEffect, rest ...uintptr) Result {
	link := "/proc/self/fd/" + strconv.Itoa(int(fd))
	switch {
	case fd == unix.AT_FDCWD:
		link = "/proc/self/cwd"
	case fd < 0:
		return errno(unix.EBADF, Emulated)
	case isVirtual(r, uint64(fd)):
		if _, open := r.P.FDs.Get(int(fd)); !open {
			return errno(unix.EBADF, Emulated)
		}
	case e.Shadows.OfGuestFd(r.P.Tgid, int(fd)) == nil:
		if e.roHostFd(r, int(fd)) {
			return errno(unix.EROFS, Host)
		}
		return cont
	}
	t, en := e.classify(r, link)
	if en != 0 {
		return errno(en, LKL)
	}
	if nr != lkl.SysFchmodat { // chmod has no flags
		rest[len(rest)-1] &^= unix.AT_SYMLINK_NOFOLLOW | unix.AT_EMPTY_PATH
	}
	return e.pathOpAt(r, t, true, nr, effect, rest)
}
