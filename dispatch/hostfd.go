package dispatch

import (
	"math"

	"golang.org/x/sys/unix"
)

// Host files in the virtual fd table.
//
// fcntl(fd, F_DUPFD or F_DUPFD_CLOEXEC, min) of a guest host fd with min at
// or above the virtual base asks for a new fd in the virtual range; the
// filter notifies exactly these (seccomp: the fcntl guard), every other
// fcntl of a host fd runs natively. busybox sh does it to save the fd it
// redirects when the file it opened for the redirection is a virtual fd:
// `cat < big` opens big at 1024 and saves fd 0 with
// fcntl(0, F_DUPFD_CLOEXEC, 1025) before the dup2(1024, 0).
//
// The guest cannot hold a host fd at that number (its RLIMIT_NOFILE is the
// base), so kbox takes a copy of the guest's fd with pidfd_getfd, which is
// the same open file description (offset, status flags, pipe end), and
// keeps it as a virtual fd whose File is Host. dup2/dup3 of it onto a host
// fd number installs that copy there (SECCOMP_IOCTL_NOTIF_ADDFD): the
// shell's restore gets the very file it saved, not a pipe. close, dup,
// fcntl (F_GETFD/F_SETFD, F_GETFL/F_SETFL, F_DUPFD), fork and exec treat it
// as any virtual fd; fstat, statx, lseek and fsync act on the copy, and so
// do read, write, pread64 and pwrite64 when it is a regular file. Other
// calls, and I/O on a pipe, terminal or socket (which could block kbox's
// one serving thread), fail with EBADF.

// dupHostHigh serves fcntl(fd, F_DUPFD or F_DUPFD_CLOEXEC, min) of the
// guest host fd fd with min in the virtual range.
func (e *Engine) dupHostHigh(r *Request, fd int, min uint32, cloexec bool) Result {
	if min > math.MaxInt32 {
		return errno(unix.EINVAL, Host) // a negative minimum
	}
	pidfd, err := unix.PidfdOpen(r.P.Tgid, 0)
	if err != nil {
		return fail(err, Host)
	}
	hfd, err := unix.PidfdGetfd(pidfd, fd, 0)
	unix.Close(pidfd)
	if err != nil {
		return fail(err, Host) // EBADF: fd is not open
	}
	if dupBeyond(r, int(min)) {
		unix.Close(hfd)
		return errno(unix.EINVAL, Host) // after EBADF, as Linux's
	}
	nfd, err := r.P.FDs.OpenHost(hfd, int(min), cloexec)
	if err != nil {
		return fail(err, Host)
	}
	return ok(int64(nfd), Host)
}

// dupBeyond reports a minimum fd number min of F_DUPFD or F_DUPFD_CLOEXEC
// that Linux refuses (EINVAL) as at or above the process's RLIMIT_NOFILE,
// whose hard limit is the virtual base. A guest asks for a number in the
// virtual range only next to the fds it holds there, as busybox sh saves
// a redirected 1024 at 1025: a minimum above its highest virtual fd plus
// one is refused. (autoconf's "fcntl handles F_DUPFD correctly" asks for
// getdtablesize(), and swaps in gnulib's fcntl when it gets an fd.)
func dupBeyond(r *Request, min int) bool {
	return r.P.FDs.IsVirtual(min) && min > r.P.FDs.Highest()+1
}

// hostPathFd gives the guest an O_PATH fd kbox opened on a host route or
// in a bind. SECCOMP_IOCTL_NOTIF_ADDFD cannot install an O_PATH file (the
// kernel's fget skips them), so it becomes a host file of the virtual
// table: *at() calls, fstat, fchdir and fexecve take it as the kernel
// would. It takes hfd.
func hostPathFd(r *Request, hfd int, cloexec bool) Result {
	nfd, err := r.P.FDs.OpenHost(hfd, 0, cloexec)
	if err != nil {
		return fail(err, Host)
	}
	return ok(int64(nfd), Host)
}

// hostFile returns kbox's copy behind a guest virtual fd that is a host
// file, and whether it is one.
func hostFile(r *Request, fd uint64) (int, bool) {
	ent, found := r.P.FDs.Get(int(int32(fd)))
	if !found || !ent.File.Host {
		return -1, false
	}
	return ent.File.HostFd, true
}

// hostIO serves read, write, pread64 and pwrite64 on a host file of the
// virtual table, a regular file (anything else could block).
func hostIO(r *Request, hfd int, write, withOff bool) Result {
	var st unix.Stat_t
	if err := unix.Fstat(hfd, &st); err != nil {
		return fail(err, Host)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errno(unix.EBADF, Host)
	}
	buf := make([]byte, min(r.Args[2], 1<<20))
	if write {
		if err := r.G.Read(r.Args[1], buf); err != nil {
			return errno(unix.EFAULT, Host)
		}
	}
	var n int
	var err error
	switch off := int64(r.Args[3]); {
	case write && withOff:
		n, err = unix.Pwrite(hfd, buf, off)
	case write:
		n, err = unix.Write(hfd, buf)
	case withOff:
		n, err = unix.Pread(hfd, buf, off)
	default:
		n, err = unix.Read(hfd, buf)
	}
	if err != nil {
		return fail(err, Host)
	}
	if !write && n > 0 {
		if err := r.G.Write(r.Args[1], buf[:n]); err != nil {
			return errno(unix.EFAULT, Host)
		}
	}
	return ok(int64(n), Host)
}

// hostFcntl serves fcntl on a host file of the virtual table (the
// commands that the table itself does not answer).
func hostFcntl(hfd int, cmd int, arg uint64) Result {
	switch cmd {
	case unix.F_GETFL, unix.F_SETFL, unix.F_GETPIPE_SZ, unix.F_SETPIPE_SZ, unix.F_GET_SEALS, unix.F_ADD_SEALS:
		v, err := unix.FcntlInt(uintptr(hfd), cmd, int(arg))
		if err != nil {
			return fail(err, Host)
		}
		return ok(int64(v), Host)
	case unix.F_GETLK, unix.F_SETLK, unix.F_SETLKW, unix.F_OFD_GETLK, unix.F_OFD_SETLK, unix.F_OFD_SETLKW:
		// POSIX locks would be kbox's, and F_SETLKW would block.
		return errno(unix.ENOLCK, Host)
	}
	return errno(unix.EINVAL, Host)
}

// restoreHost serves dup2/dup3 of a host file of the virtual table onto
// host fd number target: kbox's copy is installed there, as dup2 would.
func (e *Engine) restoreHost(r *Request, hfd, target int, cloexec bool) Result {
	// dup2 closes target: as on close.
	e.flushPumps()
	if _, err := r.G.AddFD(hfd, target, cloexec); err != nil {
		return fail(err, Host)
	}
	return ok(int64(target), Host)
}
