package dispatch

import "golang.org/x/sys/unix"

// sysXattr answers the xattr family: the default LKL has no xattr support,
// so every attribute operation is unsupported, as on a filesystem without
// xattrs. The fd forms check their fd first, as Linux does: a virtual fd
// that is not open, or open with O_PATH, is EBADF.
func sysXattr(e *Engine, r *Request) Result {
	switch r.Nr {
	case unix.SYS_FGETXATTR, unix.SYS_FSETXATTR, unix.SYS_FLISTXATTR, unix.SYS_FREMOVEXATTR:
		if isVirtual(r, r.Args[0]) && !usableFd(r, r.Args[0]) {
			return errno(unix.EBADF, Emulated)
		}
	}
	return errno(unix.EOPNOTSUPP, Emulated)
}

// usableFd reports whether virtual fd fd is open for more than O_PATH
// (an O_PATH fd serves only path-level calls: others are EBADF).
func usableFd(r *Request, fd uint64) bool {
	ent, ok := r.P.FDs.Get(int(int32(fd)))
	return ok && ent.File.Flags&unix.O_PATH == 0
}
