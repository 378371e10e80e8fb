package dispatch

import (
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
