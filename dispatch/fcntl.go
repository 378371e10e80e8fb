package dispatch

import (
	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// sysFcntl serves fcntl(2) on virtual fds.
func sysFcntl(e *Engine, r *Request) Result {
	fd := int(int32(r.Args[0]))
	cmd := int(uint32(r.Args[1]))
	dupfd := cmd == unix.F_DUPFD || cmd == unix.F_DUPFD_CLOEXEC
	if !r.P.FDs.IsVirtual(fd) {
		if dupfd && r.P.FDs.IsVirtual(int(uint32(r.Args[2]))) {
			// A dup of a host fd into the virtual range (hostfd.go).
			return e.dupHostHigh(r, fd, uint32(r.Args[2]), cmd == unix.F_DUPFD_CLOEXEC)
		}
		return cont
	}
	ent, okk := r.P.FDs.Get(fd)
	if !okk {
		return errno(unix.EBADF, Emulated)
	}
	if !dupfd && cmd != unix.F_GETFD && cmd != unix.F_SETFD && cmd != unix.F_GETFL && isPathFile(ent.File) {
		return errno(unix.EBADF, Emulated) // Linux's check_fcntl_cmd for an O_PATH file
	}
	if cmd == unix.F_NOTIFY {
		return errno(dirNotify(uint32(r.Args[2]), isDirFile(ent.File)), Emulated)
	}
	if ent.File.Host && !dupfd && cmd != unix.F_GETFD && cmd != unix.F_SETFD {
		return hostFcntl(ent.File.HostFd, cmd, r.Args[2])
	}
	switch cmd {
	case unix.F_GETFD:
		if ent.Cloexec {
			return ok(unix.FD_CLOEXEC, Emulated)
		}
		return ok(0, Emulated)
	case unix.F_SETFD:
		r.P.FDs.SetCloexec(fd, r.Args[2]&unix.FD_CLOEXEC != 0)
		return ok(0, Emulated)
	case unix.F_GETFL:
		return ok(int64(getfl(ent.File.LKLFd, ent.File.Flags)), LKL)
	case unix.F_SETFL:
		if ent.File.Listing != nil {
			return ok(0, Emulated)
		}
		if le := setfl(ent.File.LKLFd, int(r.Args[2])); le != 0 {
			return errno(le, LKL)
		}
		ent.File.Flags = ent.File.Flags&^unix.O_DIRECT | int(r.Args[2])&unix.O_DIRECT
		return ok(0, LKL)
	case unix.F_DUPFD, unix.F_DUPFD_CLOEXEC:
		if int32(r.Args[2]) < 0 {
			return errno(unix.EINVAL, Emulated)
		}
		nfd, err := r.P.FDs.Dup(fd, int(int32(r.Args[2])), cmd == unix.F_DUPFD_CLOEXEC)
		if err != nil {
			return fail(err, Emulated)
		}
		return ok(int64(nfd), Emulated)
	case unix.F_GETLK, unix.F_SETLK, unix.F_SETLKW, unix.F_OFD_GETLK, unix.F_OFD_SETLK, unix.F_OFD_SETLKW:
		return errno(unix.ENOLCK, Emulated) // this LKL has no file locking
	}
	return errno(unix.EINVAL, Emulated)
}

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
