// The io family: read, write, seek, ioctl, their positioned forms and the
// copies between fds, on virtual fds; on host fds they run natively (FamIO
// in table.go).

package dispatch

import (
	"strconv"

	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// sysRead serves read(2) on virtual fds.
func sysRead(e *Engine, r *Request) Result { return lklFdIO(r, lkl.SysRead, false, false) }

// sysWrite serves write(2) on virtual fds.
func sysWrite(e *Engine, r *Request) Result { return lklFdIO(r, lkl.SysWrite, true, false) }

// sysLseek serves lseek(2) on virtual fds.
func sysLseek(e *Engine, r *Request) Result {
	if l, _ := listingOf(r, r.Args[0]); l != nil {
		off, err := l.Seek(int64(r.Args[1]), int(int32(r.Args[2])))
		if err != nil {
			return fail(err, Emulated)
		}
		return ok(off, Emulated)
	}
	if hfd, isHost := hostFile(r, r.Args[0]); isHost {
		off, err := unix.Seek(hfd, int64(r.Args[1]), int(int32(r.Args[2])))
		if err != nil {
			return fail(err, Host)
		}
		return ok(off, Host)
	}
	lfd, en := vfd(r, r.Args[0])
	if en != 0 {
		return errno(en, LKL)
	}
	res, le := lkl.Syscall6(lkl.SysLseek, uintptr(lfd), uintptr(r.Args[1]), uintptr(r.Args[2]), 0, 0, 0)
	if le != 0 {
		return errno(le, LKL)
	}
	if res == 0 && len(e.Opt.Binds) > 0 {
		if ent, okk := r.P.FDs.Get(int(int32(r.Args[0]))); okk {
			ent.File.Listed.Store(0) // rewinddir: list mount points again
		}
	}
	return ok(int64(res), LKL)
}

// sysPread serves pread64(2) on virtual fds.
func sysPread(e *Engine, r *Request) Result { return lklFdIO(r, lkl.SysPread64, false, true) }

// sysPwrite serves pwrite64(2) on virtual fds.
func sysPwrite(e *Engine, r *Request) Result { return lklFdIO(r, lkl.SysPwrite64, true, true) }

// sysCopyHostOnly serves copy_file_range(2), sendfile(2), splice(2) and the rest of its family: host fds only.
func sysCopyHostOnly(e *Engine, r *Request) Result {
	if r.Nr == unix.SYS_SPLICE || r.Nr == unix.SYS_TEE {
		// Linux looks at the length and the flags before the fds.
		n, fl := r.Args[4], r.Args[5]
		if r.Nr == unix.SYS_TEE {
			n, fl = r.Args[2], r.Args[3]
		}
		switch {
		case fl&^spliceFlags != 0 && (r.Nr == unix.SYS_TEE || n != 0):
			return errno(unix.EINVAL, Emulated)
		case n == 0:
			return ok(0, Emulated)
		}
	}
	if copyModes(r) {
		return errno(unix.EBADF, Emulated)
	}
	if isVirtual(r, r.Args[0]) || isVirtual(r, r.Args[1]) && (r.Nr == unix.SYS_SENDFILE || r.Nr == unix.SYS_TEE) ||
		isVirtual(r, r.Args[2]) && (r.Nr == unix.SYS_COPY_FILE_RANGE || r.Nr == unix.SYS_SPLICE) {
		return errno(unix.EINVAL, Emulated) // callers fall back to read/write
	}
	return cont
}

// spliceFlags are the flags splice(2) and tee(2) know (SPLICE_F_ALL).
const spliceFlags = unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK | unix.SPLICE_F_MORE | unix.SPLICE_F_GIFT

// copyModes reports whether sendfile, copy_file_range, splice or tee
// names a virtual fd as its source that is not open for reading, or as
// its destination one not open for writing (or, for copy_file_range,
// open to append): Linux refuses those with EBADF before anything else
// of the files.
func copyModes(r *Request) bool {
	in, out := r.Args[0], r.Args[2]
	switch r.Nr {
	case unix.SYS_SENDFILE:
		in, out = r.Args[1], r.Args[0]
	case unix.SYS_TEE:
		out = r.Args[1]
	case unix.SYS_SPLICE:
	case unix.SYS_COPY_FILE_RANGE:
		if r.Args[5] != 0 {
			return false // EINVAL first
		}
	default:
		return false
	}
	refuse := func(fd uint64, mode int) bool {
		ent, ok := r.P.FDs.Get(int(int32(fd)))
		if !ok || r.Nr == unix.SYS_COPY_FILE_RANGE && isDirFile(ent.File) {
			return false // Linux: EISDIR before the modes; kbox: EINVAL
		}
		fl := ent.File.Flags
		if ent.File.Host {
			if v, err := unix.FcntlInt(uintptr(ent.File.HostFd), unix.F_GETFL, 0); err == nil {
				fl = v
			}
		}
		return fl&unix.O_PATH != 0 || fl&unix.O_ACCMODE == mode ||
			mode == unix.O_RDONLY && r.Nr == unix.SYS_COPY_FILE_RANGE && fl&unix.O_APPEND != 0
	}
	return refuse(in, unix.O_WRONLY) || refuse(out, unix.O_RDONLY)
}

// sysReadahead serves readahead(2) on virtual fds, in LKL.
func sysReadahead(e *Engine, r *Request) Result {
	// EBADF for an O_PATH or write-only file, EINVAL for a directory (a
	// listing, whose entries kbox holds) or another kind of file.
	if ent, open := r.P.FDs.Get(int(int32(r.Args[0]))); open && ent.File.Listing != nil {
		return errno(unix.EINVAL, Emulated)
	}
	return onLKLFd(r, lkl.SysReadahead)
}

// sysFadvise serves fadvise64(2).
func sysFadvise(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	return ok(0, Emulated)
}

// sysEpollCtl serves epoll_ctl(2) when the epoll fd or the target is a
// virtual fd (the filter runs the rest natively). A virtual fd is an LKL
// file or directory, or a directory kbox lists, none of which Linux can
// poll: EPERM, after what Linux checks first (the event's memory, then
// both fds open, O_PATH ones not counting). A host file kbox keeps at a
// virtual number (hostfd.go) is EPERM as a regular file or directory and
// EBADF otherwise, as its other calls are. An epoll fd that is virtual is
// no epoll instance: EINVAL once the target could be polled.
func sysEpollCtl(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) && !isVirtual(r, r.Args[2]) {
		return cont // a negative fd: the host's EBADF
	}
	if r.Args[1] != unix.EPOLL_CTL_DEL {
		var ev unix.EpollEvent
		if r.G.Read(r.Args[3], asBytes(&ev)) != nil {
			return errno(unix.EFAULT, Emulated)
		}
	}
	epOpen, _ := pollKind(r, r.Args[0])
	if _, isHost := hostFile(r, r.Args[0]); !epOpen || isHost {
		return errno(unix.EBADF, Emulated)
	}
	open, canPoll := pollKind(r, r.Args[2])
	switch {
	case !open:
		return errno(unix.EBADF, Emulated)
	case !canPoll:
		return errno(unix.EPERM, Emulated)
	case isVirtual(r, r.Args[0]):
		return errno(unix.EINVAL, Emulated)
	}
	return errno(unix.EBADF, Emulated) // a pipe or socket kbox keeps at a virtual number
}

// pollKind reports whether the guest's fd is open for epoll (not O_PATH)
// and whether Linux could poll it: not a regular file or a directory, nor
// an LKL file.
func pollKind(r *Request, fd uint64) (open, canPoll bool) {
	n := int(int32(fd))
	if n < 0 {
		return false, false
	}
	var st unix.Stat_t
	if !isVirtual(r, fd) {
		if unix.Stat("/proc/"+strconv.Itoa(r.P.Tgid)+"/fd/"+strconv.Itoa(n), &st) != nil {
			return false, false
		}
	} else {
		ent, found := r.P.FDs.Get(n)
		switch {
		case !found, isPathFile(ent.File):
			return false, false
		case !ent.File.Host:
			return true, false
		case unix.Fstat(ent.File.HostFd, &st) != nil:
			return false, false
		}
	}
	t := st.Mode & unix.S_IFMT
	return true, t != unix.S_IFREG && t != unix.S_IFDIR
}

// sysEpollWait serves the epoll_wait family on a virtual fd, which is never an epoll instance.
func sysEpollWait(e *Engine, r *Request) Result {
	// EINVAL, or EBADF when the fd is not open.
	if _, open := r.P.FDs.Get(int(int32(r.Args[0]))); !open {
		return errno(unix.EBADF, Emulated)
	}
	return errno(unix.EINVAL, Emulated)
}

// sysSyncFileRange serves sync_file_range(2): a shadow's write-back, or LKL's own.
func sysSyncFileRange(e *Engine, r *Request) Result {
	// On a shadow, a write-back of the node (its changed chunks) and LKL's
	// sync_file_range of the range (shadowfd.SyncRange); on a virtual fd,
	// LKL's own.
	if n := e.nodeOf(r, int(int32(r.Args[0]))); n != nil {
		// Linux's checks of the range and flags (a shadow is a regular
		// file: no ESPIPE); no flag asks for nothing.
		off, end := int64(r.Args[1]), int64(r.Args[1])+int64(r.Args[2])
		if r.Args[3]&^syncFileRangeFlags != 0 || off < 0 || end < 0 || end < off {
			return errno(unix.EINVAL, LKL)
		}
		if r.Args[3] == 0 {
			return ok(0, LKL)
		}
		if err := e.Shadows.SyncRange(n, off, int64(r.Args[2]), int(r.Args[3])); err != nil {
			return fail(err, LKL)
		}
		return ok(0, LKL)
	}
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	return onLKLFd(r, lkl.SysSyncFileRange)
}

// syncFileRangeFlags are sync_file_range's flags: WAIT_BEFORE, WRITE,
// WAIT_AFTER.
const syncFileRangeFlags = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER

// sysNotOnVirtual refuses a host-fd-only call on a virtual fd.
func sysNotOnVirtual(e *Engine, r *Request) Result {
	if _, en := vfd(r, r.Args[0]); en != 0 {
		return errno(en, Emulated)
	}
	return errno(unix.EOPNOTSUPP, Emulated)
}
