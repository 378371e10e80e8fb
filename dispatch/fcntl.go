package dispatch

import (
	"strconv"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// dirNotify answers F_NOTIFY (dnotify) with arg on a virtual fd, of a
// directory or not, as Linux's fcntl_dirnotify: an arg that asks for no
// event (0, or DN_MULTISHOT alone) removes the fd's watches, of which
// there are none (0, on any file); a watch needs a directory (ENOTDIR).
// A watch itself is EINVAL, what Linux gives when dnotify is off: this
// LKL has no dnotify, and the changes of a shadow's content are the
// host's, not seen by kbox (docs/tiers.md).
func dirNotify(arg uint32, dir bool) unix.Errno {
	const dnMultishot = 0x80000000 // DN_MULTISHOT
	switch {
	case arg&^dnMultishot == 0:
		return 0
	case !dir:
		return unix.ENOTDIR
	}
	return unix.EINVAL
}

// isPathFile reports whether a virtual fd's file was opened O_PATH.
func isPathFile(f *fdtable.File) bool {
	if f.Host {
		fl, err := unix.FcntlInt(uintptr(f.HostFd), unix.F_GETFL, 0)
		return err == nil && fl&unix.O_PATH != 0
	}
	return f.Flags&unix.O_PATH != 0
}

// isDirFile reports whether a virtual fd's file is a directory.
func isDirFile(f *fdtable.File) bool {
	if f.Listing != nil {
		return true
	}
	if f.Host {
		var hst unix.Stat_t
		return unix.Fstat(f.HostFd, &hst) == nil && hst.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	st, err := lkl.Fstat(f.LKLFd)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// setflMask are the file status flags F_SETFL changes on a virtual fd; the
// LKL open file holds them (so dups and forked copies share them, as file
// descriptions do), but for O_DIRECT (below). O_ASYNC is not among them:
// SIGIO from LKL could not reach the guest.
const setflMask = unix.O_APPEND | unix.O_NONBLOCK | unix.O_NOATIME | unix.O_DIRECT

// openOnly are open flags that F_GETFL never reports.
const openOnly = unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_TRUNC | unix.O_CLOEXEC

// O_DIRECT never reaches LKL: LKL's direct I/O cannot use kbox's buffers
// (reads fail with EFAULT), and a shadow is filled through LKL. The guest's
// O_DIRECT is kept in the open file's flags (fdtable.File.Flags, shared
// like the file description) for a virtual fd, and on the host file for a
// shadow (hostStatus). Its alignment rules are not enforced: the data goes
// through LKL's page cache or lives in a memfd (docs/tiers.md).

// getfl returns a virtual fd's F_GETFL: the access mode and other open
// flags it was opened with (the LKL fd may be O_RDWR for an O_WRONLY
// open), O_DIRECT as the guest last set it, and the other status flags as
// LKL has them now.
func getfl(lfd, openFlags int) int {
	fl := openFlags &^ (openOnly | setflMask)
	fl |= openFlags & unix.O_DIRECT
	v, le := lkl.Syscall6(lkl.SysFcntl, uintptr(lfd), unix.F_GETFL, 0, 0, 0, 0)
	if le != 0 {
		return fl | openFlags&setflMask
	}
	return fl | int(lkl.OpenFlagsFromLKL(uint32(v)))&setflMask&^unix.O_DIRECT
}

// setfl sets the status flags of a virtual fd's LKL file to those of
// flags in setflMask but O_DIRECT (kept by the caller); the rest of flags
// is ignored, as by Linux.
func setfl(lfd, flags int) unix.Errno {
	_, le := lkl.Syscall6(lkl.SysFcntl, uintptr(lfd), unix.F_SETFL, uintptr(lkl.OpenFlagsToLKL(uint32(flags&setflMask&^unix.O_DIRECT))), 0, 0, 0)
	return le
}

// hostStatus gives a shadow's host fd the guest's O_DIRECT, so that
// F_GETFL (native on a host fd) reports it and F_SETFL can clear it. A
// reopened memfd accepts it on Linux 6.6 and later (tmpfs direct I/O);
// on an older host the shadow goes without it.
func hostStatus(hfd, flags int) {
	if flags&unix.O_DIRECT == 0 {
		return
	}
	if fl, err := unix.FcntlInt(uintptr(hfd), unix.F_GETFL, 0); err == nil {
		unix.FcntlInt(uintptr(hfd), unix.F_SETFL, fl|unix.O_DIRECT)
	}
}

// writeOnly gives a write-only open that becomes a virtual fd an LKL fd
// that only writes: lklOpenFlags asked LKL for read access too, which a
// shadow's fill needs, and the virtual fd's reads, mappings and copies
// would use it (Linux: EBADF, EACCES). lfd (which writeOnly takes) is
// returned when LKL opened it write-only (lklOpenAt's fallback), else
// its file is opened again write-only through LKL's /proc/self/fd, with
// the caller's credentials (which let it open the file read-write) and
// the same status flags, and lfd is closed. Without the kernel's /proc
// lfd stays as it is.
func (e *Engine) writeOnly(r *Request, lfd int) (int, unix.Errno) {
	v, le := lkl.Syscall6(lkl.SysFcntl, uintptr(lfd), unix.F_GETFL, 0, 0, 0, 0)
	if le != 0 {
		lkl.Close(lfd)
		return -1, le
	}
	if int(v)&unix.O_ACCMODE == unix.O_WRONLY || !e.Opt.HasKernelProc {
		return lfd, 0
	}
	fl := int(v)&^unix.O_ACCMODE | unix.O_WRONLY | int(lkl.OpenFlagsToLKL(unix.O_CLOEXEC))
	fd, le := e.kprocPath(lkl.SysOpenat, 1, "self/fd/"+strconv.Itoa(lfd), [6]uintptr{0, 0, uintptr(fl)})
	lkl.Close(lfd)
	if le != 0 {
		return -1, le
	}
	return int(fd), 0
}
