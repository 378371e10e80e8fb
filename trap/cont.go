//go:build linux && amd64 && cgo

package trap

import (
	"github.com/kbox-project/kbox/dispatch"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// cont carries out a syscall the engine let through (dispatch.Continue):
// the host kernel runs it on the guest's thread, in kbox mode. What would
// change kbox's fd table or process is adjusted: closing a guest fd puts
// a placeholder back, fds the kernel makes are moved into the guest's
// range, dup2 over kbox's fds and exit_group are never run natively.
func (th *thread) cont(nr int, a *[6]uint64) {
	t := tr
	g := t.fds.g
	fd0 := int(int32(a[0]))
	switch nr {
	case unix.SYS_EXIT_GROUP:
		t.finish(Exit{Status: int(a[0] & 0xff)})
		th.die.Store(true)
		return
	case unix.SYS_CLOSE:
		th.ret(-int64(sysabi.ErrnoOr(t.fds.release(fd0), unix.EMFILE)))
		return
	case unix.SYS_CLOSE_RANGE:
		th.closeRange(uint32(a[0]), uint32(a[1]), a[2])
		return
	case unix.SYS_DUP2, unix.SYS_DUP3:
		nfd := int(int32(a[1]))
		if !t.fds.open(fd0) || nfd < 0 || nfd >= g || t.fds.kbox[nfd] {
			th.fail(unix.EBADF) // kbox's fds are not the guest's
			return
		}
		if fd0 == nfd {
			if nr == unix.SYS_DUP3 {
				th.fail(unix.EINVAL)
			} else {
				th.ret(int64(nfd))
			}
			return
		}
		var flags uint64
		if nr == unix.SYS_DUP3 {
			flags = a[2] // dup2 has no third argument
		}
		if flags&^unix.O_CLOEXEC != 0 {
			th.fail(unix.EINVAL)
			return
		}
		if err := t.fds.install(fd0, nfd, flags&unix.O_CLOEXEC != 0); err != nil {
			th.fail(sysabi.ErrnoOr(err, unix.EMFILE))
			return
		}
		th.ret(int64(nfd))
		return
	case unix.SYS_DUP:
		if !t.fds.open(fd0) {
			th.fail(unix.EBADF)
			return
		}
		fd, err := t.fds.place(fd0, 0, false)
		th.retFD(fd, err)
		return
	case unix.SYS_FCNTL:
		if !t.fds.open(fd0) {
			th.fail(unix.EBADF)
			return
		}
		if a[1] == unix.F_DUPFD || a[1] == unix.F_DUPFD_CLOEXEC {
			min := int(int32(a[2]))
			if min < 0 || min >= g {
				th.fail(unix.EINVAL)
				return
			}
			fd, err := t.fds.place(fd0, min, a[1] == unix.F_DUPFD_CLOEXEC)
			th.retFD(fd, err)
			return
		}
	case unix.SYS_SETRLIMIT, unix.SYS_PRLIMIT64:
		res := a[0]
		if nr == unix.SYS_PRLIMIT64 {
			res = a[1]
		}
		if res == unix.RLIMIT_NOFILE {
			// The guest's limit is its fd range: setting is accepted
			// (the engine checked it), the range stays.
			if nr == unix.SYS_PRLIMIT64 && a[3] != 0 {
				lim := [2]uint64{uint64(g), uint64(g)}
				if writeMem(&t.mem, a[3], bytesOf(&lim)) != nil {
					th.fail(unix.EFAULT)
					return
				}
			}
			th.ret(0)
			return
		}
		if nr == unix.SYS_SETRLIMIT {
			th.keepLimit(res, a[1], 0)
			return
		}
		if a[2] != 0 {
			th.keepLimit(res, a[2], a[3])
			return
		}
	}
	if !nativeFDs(nr, a) {
		th.fail(unix.EBADF)
		return
	}
	// Made on the core's entry, which a kick ends: a signal interrupts
	// a blocking call (restart.go).
	r, en := th.core.native(nr, a)
	if en != 0 {
		th.fail(en)
		return
	}
	if makesFD[nr] || nr == unix.SYS_IOCTL && dispatch.IoctlMakesFD(a[1]) {
		fd, err := t.fds.move(int(r))
		th.retFD(fd, err)
		return
	}
	switch nr {
	case unix.SYS_RECVMSG:
		recvRights(a[1])
	case unix.SYS_RECVMMSG:
		for i := uint64(0); i < uint64(r); i++ {
			recvRights(a[1] + i*sysabi.MmsghdrSize)
		}
	}
	th.ret(int64(r))
}

// keepLimit answers a set of limit res to the limits at newp: kbox's own
// limits (stack, core, file size, address space) are the process's, so
// the guest may read them but not change them (EPERM), but for lowering
// the core limit. Setting a limit to what it is changes nothing and
// succeeds, as on Linux; the old limits go to oldp (prlimit). The errors
// come in Linux's order: EFAULT, then EINVAL for an unknown resource or a
// soft limit above the hard one.
func (th *thread) keepLimit(res, newp, oldp uint64) {
	var want [2]uint64
	if readMem(newp, bytesOf(&want)) != nil {
		th.fail(unix.EFAULT)
		return
	}
	cur, en := nativeRlimit(res)
	if en != 0 {
		th.fail(en)
		return
	}
	if want[0] > want[1] {
		th.fail(unix.EINVAL)
		return
	}
	if want != cur {
		// Lowering the core limit only stops kbox's process from
		// dumping core, as programs that hold secrets ask.
		if res != unix.RLIMIT_CORE || want[0] > cur[0] || want[1] > cur[1] {
			th.fail(unix.EPERM)
			return
		}
		if err := unix.Prlimit(0, unix.RLIMIT_CORE, &unix.Rlimit{Cur: want[0], Max: want[1]}, nil); err != nil {
			th.fail(sysabi.ErrnoOr(err, unix.EPERM))
			return
		}
	}
	if oldp != 0 && writeMem(&tr.mem, oldp, bytesOf(&cur)) != nil {
		th.fail(unix.EFAULT)
		return
	}
	th.ret(0)
}

func (th *thread) retFD(fd int, err error) {
	if err != nil {
		th.fail(sysabi.ErrnoOr(err, unix.EMFILE))
		return
	}
	th.ret(int64(fd))
}

// closeRange is close_range(2) over the guest's range (the engine closed
// its virtual fds already).
func (th *thread) closeRange(lo, hi uint32, flags uint64) {
	t := tr
	if lo > hi || flags&^uint64(unix.CLOSE_RANGE_CLOEXEC|unix.CLOSE_RANGE_UNSHARE) != 0 {
		th.fail(unix.EINVAL)
		return
	}
	for fd := int(lo); fd < t.fds.g && fd <= int(hi); fd++ {
		if !t.fds.open(fd) {
			continue
		}
		if flags&unix.CLOSE_RANGE_CLOEXEC != 0 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		} else {
			t.fds.release(fd)
		}
	}
	th.ret(0)
}

// makesFD are the syscalls whose result is a new fd; fdArgs and dirfdArgs
// the indexes of their fd and directory fd arguments (bit i: argument
// i). All from the table's FDs; a call the table refuses or lacks has no
// fd checked (its answer is the same whatever the fds).
var makesFD, fdArgs, dirfdArgs = func() ([]bool, []uint8, []uint8) {
	m, f, d := make([]bool, dispatch.MaxNr), make([]uint8, dispatch.MaxNr), make([]uint8, dispatch.MaxNr)
	for nr := range dispatch.MaxNr {
		s := dispatch.Lookup(nr)
		m[nr] = s.FDs&dispatch.NewFD != 0
		if s.How == dispatch.Refused || s.How == dispatch.Absent {
			continue
		}
		f[nr], d[nr] = s.FDs.FDArgs(), s.FDs.Dirfds()
	}
	return m, f, d
}()

// checkFDs keeps the guest's calls off fd numbers that are not its own:
// a closed guest fd (a placeholder, which the engine would otherwise see
// open) and a number at or above the guest's range that is no open
// virtual fd (kbox's own) are EBADF in an fd argument, and a bad
// directory fd of an *at call becomes one the engine sees as bad (-1: an
// absolute path still works, a relative one fails with EBADF, as Linux
// has it).
func (th *thread) checkFDs(nr int, a *[6]uint64) unix.Errno {
	if nr < 0 || nr >= len(fdArgs) || fdArgs[nr]|dirfdArgs[nr] == 0 {
		return 0
	}
	for i := range 6 {
		if fdArgs[nr]&(1<<i) != 0 && !th.guestFD(int(int32(a[i]))) {
			return unix.EBADF
		}
	}
	for i := range 6 {
		if dirfdArgs[nr]&(1<<i) != 0 && !th.guestFD(int(int32(a[i]))) {
			a[i] = ^uint64(0)
		}
	}
	return 0
}

// guestFD reports whether fd may reach the engine as the guest's: an
// open guest fd, an open virtual fd, or a negative number (AT_FDCWD, or
// one the engine answers EBADF itself).
func (th *thread) guestFD(fd int) bool {
	s := tr.fds
	switch {
	case fd < 0:
		return true
	case fd < s.g:
		return s.open(fd)
	}
	p := tr.eng.Lookup(th.tid)
	if p == nil {
		return false
	}
	_, open := p.FDs.Get(fd)
	return open
}

// nativeFDs reports whether the fd arguments of a call the engine let
// through are the guest's host fds (below its range), making a directory
// fd at or above the range bad (-1). A virtual fd number exists only in
// the engine's table: as in the seccomp tier, where the host kernel never
// sees it, the call gets EBADF, and never one of kbox's fds of that
// number.
func nativeFDs(nr int, a *[6]uint64) bool {
	if nr < 0 || nr >= len(fdArgs) {
		return true
	}
	g := tr.fds.g
	for i := range 6 {
		fd := int(int32(a[i]))
		if fdArgs[nr]&(1<<i) != 0 && fd >= g {
			return false
		}
		if dirfdArgs[nr]&(1<<i) != 0 && fd >= g {
			a[i] = ^uint64(0)
		}
	}
	return true
}

// mayShare reports whether syscall nr with arguments a could copy a
// description to another fd or process, or change a description's state.
func mayShare(nr int, a *[6]uint64) bool {
	switch nr {
	case unix.SYS_DUP, unix.SYS_DUP2, unix.SYS_DUP3, unix.SYS_FLOCK, unix.SYS_SENDMSG, unix.SYS_SENDMMSG:
		return true
	case unix.SYS_FCNTL:
		switch a[1] {
		case unix.F_GETFD, unix.F_SETFD, unix.F_GETFL, unix.F_GETLK, unix.F_SETLK, unix.F_SETLKW, unix.F_OFD_GETLK:
			return false
		}
		return true
	}
	return false
}
