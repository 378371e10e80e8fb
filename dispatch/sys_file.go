// The file family's handlers of fds: open, close, dup, fcntl, getdents,
// fsync, truncation and allocation, umask (FamFile in table.go). Its path
// handlers are in sys_file_path.go, inotify in sys_file_inotify.go.

package dispatch

import (
	"errors"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

func isVirtual(r *Request, fd uint64) bool { return r.P.FDs.IsVirtual(int(int32(fd))) }

// vfd returns the LKL fd behind a virtual guest fd. A host file kept in
// the virtual table (hostfd.go) has none: EBADF, unless the handler serves
// it first.
func vfd(r *Request, fd uint64) (int, unix.Errno) {
	e, ok := r.P.FDs.Get(int(int32(fd)))
	if !ok || e.File.Host || e.File.Listing != nil {
		return -1, unix.EBADF
	}
	return e.File.LKLFd, 0
}

// onLKLFd runs LKL syscall nr on the LKL file behind the virtual fd in
// r.Args[0], passing the guest's other (scalar) arguments as they are.
func onLKLFd(r *Request, nr uintptr) Result {
	lfd, en := vfd(r, r.Args[0])
	if en != 0 {
		return errno(en, LKL)
	}
	res, le := lkl.Syscall6(nr, uintptr(lfd), uintptr(r.Args[1]), uintptr(r.Args[2]), uintptr(r.Args[3]), uintptr(r.Args[4]), uintptr(r.Args[5]))
	if le != 0 {
		return errno(le, LKL)
	}
	return ok(int64(res), LKL)
}

// sysOpen serves open(2).
func sysOpen(e *Engine, r *Request) Result {
	flags, mode := openArgs(r.Args[1], r.Args[2])
	return e.open(r, unix.AT_FDCWD, r.Args[0], flags, mode)
}

// sysOpenat serves openat(2).
func sysOpenat(e *Engine, r *Request) Result {
	flags, mode := openArgs(r.Args[2], r.Args[3])
	return e.open(r, int32(r.Args[0]), r.Args[1], flags, mode)
}

// sysCreat serves creat(2).
func sysCreat(e *Engine, r *Request) Result {
	flags, mode := openArgs(unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, r.Args[1])
	return e.open(r, unix.AT_FDCWD, r.Args[0], flags, mode)
}

// openArgs reduces open's flags and mode as the kernel does before it
// opens (what openat2 would refuse, open ignores): bits that are no
// O_* flag go, the mode keeps its permission bits (busybox cp passes the
// source's st_mode, file type and all) and only when a file may be
// created, and O_PATH keeps only the flags it honours. Binds and host
// routes are opened with the host's openat2, which is strict.
func openArgs(flags, mode uint64) (int, uint32) {
	f := int(flags) & validOpenFlags
	if f&unix.O_PATH != 0 {
		f &= unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	m := uint32(mode) & 0o7777
	if !willCreate(uint64(f)) {
		m = 0
	}
	return f, m
}

// sysOpenat2 serves openat2(2).
func sysOpenat2(e *Engine, r *Request) Result {
	var how unix.OpenHow
	size := r.Args[3]
	switch {
	case size < openHowSize:
		return errno(unix.EINVAL, Emulated)
	case size > 4096:
		return errno(unix.E2BIG, Emulated)
	}
	if err := r.G.Read(r.Args[2], asBytes(&how)); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	if size > openHowSize {
		// A larger struct from a newer libc: its extra fields must be 0.
		sc := getScratch()
		defer putScratch(sc)
		extra := sc.str[:size-openHowSize]
		if err := r.G.Read(r.Args[2]+openHowSize, extra); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
		for _, b := range extra {
			if b != 0 {
				return errno(unix.E2BIG, Emulated)
			}
		}
	}
	if en := checkOpenHow(&how); en != 0 {
		return errno(en, Emulated)
	}
	return e.open(r, int32(r.Args[0]), r.Args[1], int(how.Flags), uint32(how.Mode))
}

// willCreate says whether open flags may create a file: O_CREAT, or
// O_TMPFILE's own bit (unix.O_TMPFILE includes O_DIRECTORY).
func willCreate(flags uint64) bool { return flags&(unix.O_CREAT|oTmpfileBit) != 0 }

const oTmpfileBit = 0o20000000 // __O_TMPFILE

// openHowSize is the size of struct open_how (OPEN_HOW_SIZE_VER0);
// resolveCached is RESOLVE_CACHED (Linux 5.12), which x/sys/unix lacks.
const (
	openHowSize   = 24
	resolveCached = 0x20
)

// validOpenFlags are the O_* bits open accepts: the same bit set on x86_64
// and arm64, which only order O_DIRECT, O_LARGEFILE, O_DIRECTORY and
// O_NOFOLLOW differently.
const validOpenFlags = 0o37777703

// checkOpenHow refuses what openat2 refuses. RESOLVE_* flags are not
// honoured: kbox resolves paths itself (resolve.go). RESOLVE_CACHED alone
// gets EAGAIN, which its callers answer by retrying without it; the others
// get ENOSYS, which makes callers such as Go's os.Root walk the path
// themselves rather than trust a containment kbox would not give.
func checkOpenHow(how *unix.OpenHow) unix.Errno {
	const validResolve = unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS |
		unix.RESOLVE_BENEATH | unix.RESOLVE_IN_ROOT | resolveCached
	switch {
	case how.Flags&^validOpenFlags != 0, how.Resolve&^validResolve != 0:
		return unix.EINVAL
	case willCreate(how.Flags) && how.Mode&^0o7777 != 0:
		return unix.EINVAL
	case !willCreate(how.Flags) && how.Mode != 0:
		return unix.EINVAL
	case how.Resolve&(unix.RESOLVE_BENEATH|unix.RESOLVE_IN_ROOT) == unix.RESOLVE_BENEATH|unix.RESOLVE_IN_ROOT:
		return unix.EINVAL
	case how.Resolve == resolveCached:
		return unix.EAGAIN
	case how.Resolve != 0:
		return unix.ENOSYS
	}
	return 0
}

// open serves every open variant. Regular image files become shadow memfds
// installed as host fds (native read/mmap); directories and special files
// become virtual fds; host-route paths are opened on the host, confined;
// /proc is kbox's own (package procfs; procserve.go).
func (e *Engine) open(r *Request, dirfd int32, addr uint64, flags int, mode uint32) Result {
	p, en := readPath(r, addr)
	if en != 0 {
		return errno(en, LKL)
	}
	var t guestpath.Target
	if q := r.P.takeScript(p); q != p && r.P.chroot() != "" {
		// The script's image path, not one inside the caller's root.
		en = e.resolvedInto(r, q, q, &t)
	} else {
		en = e.resolveInto(r, dirfd, q, &t)
	}
	if en != 0 {
		return errno(en, LKL)
	}
	return e.openTarget(r, t, flags, mode)
}

// openTarget opens a resolved target for the guest.
func (e *Engine) openTarget(r *Request, t guestpath.Target, flags int, mode uint32) Result {
	if flags&unix.O_NOFOLLOW == 0 {
		// /dev/fd, /dev/fd/N (sys_file_dev.go)
		if t.Fd > 0 {
			return e.openFd(r, t.Fd-1, flags, mode)
		}
		if t.FdDir {
			var en unix.Errno
			if t, en = e.followDev(r, t); en != 0 {
				return errno(en, Emulated)
			}
		}
	}
	if t.Proc != nil {
		return e.procOpen(r, t, flags, mode) // a node of /proc (procserve.go)
	}
	cloexec := flags&unix.O_CLOEXEC != 0
	if t.Host {
		if en := guestpath.RoRoute(t, flags); en != 0 {
			return errno(en, Denied)
		}
		if t.Route == "/proc" && t.Bind == nil && (flags&unix.O_ACCMODE != unix.O_RDONLY || flags&unix.O_TRUNC != 0) {
			if en := e.procWriteCheck(r, t.Rel); en != 0 { // procfs.WriteCheck
				return errno(en, Emulated)
			}
		}
		hfd, how, err := e.openHostNoWait(r, t, flags&^unix.O_CLOEXEC, mode) // hostfifo.go
		switch {
		case how == hostWait:
			return e.hostFIFOWait(r, t, flags&^unix.O_CLOEXEC, cloexec, hfd)
		case err != nil:
			return fail(err, Host)
		case flags&unix.O_PATH != 0:
			return hostPathFd(r, hfd, cloexec) // ADDFD takes no O_PATH file (hostfd.go)
		case how == hostFIFO:
			// kbox's copy closes before the guest resumes: no reader
			// or writer the guest could notice (an EOF that comes late).
			gfd, err := r.G.AddFD(hfd, -1, cloexec)
			unix.Close(hfd)
			if err != nil {
				return fail(err, Host)
			}
			return ok(int64(gfd), Host)
		}
		defer unix.Close(hfd)
		gfd, err := r.G.AddFDReply(hfd, cloexec)
		if err != nil {
			return fail(err, Host)
		}
		return answered(int64(gfd), Host)
	}
	if res, done := e.openDevice(r, t, flags); done {
		return res // a node in /dev, by its stat (sys_file_dev.go)
	}
	if res, done := e.openCached(r, t, flags); done {
		return res
	}
	// Only the general path may change LKL state: a path error, a host
	// route or a bind leave it as it was (cache.go). An open that may
	// create, truncate or write changes it from the start. A read-only one
	// that LKL opened changes nothing a stat sees: Linux's open moves no
	// time, and a shadow's fill reads with O_NOATIME, as root
	// (shadowfd.takeLKLFd), its access time following the guests' own
	// reads. One LKL refused otherwise than by the lookup goes on to
	// kbox's device and append-only paths: a change, to be safe.
	readOnly := flags&unix.O_ACCMODE == unix.O_RDONLY && !willCreate(uint64(flags)) && flags&unix.O_TRUNC == 0
	if !readOnly {
		e.stats.Changed()
	}
	lflags, probe := lklOpenFlags(flags)
	fd, le := e.lklOpen(r, t.LKLPath(), lflags, createMode(r, t.LKLPath(), flags, mode), flags)
	var quiet, lazy uint64 // a directory on a read-only or lazy mount (cache.go)
	if readOnly {
		switch le {
		case unix.ENOENT, unix.ENOTDIR, unix.EACCES, unix.ELOOP, unix.ENAMETOOLONG:
			return errno(le, LKL)
		case 0:
			if flags&unix.O_DIRECTORY != 0 {
				quiet, lazy = e.quietDir(int(fd))
			}
		default:
			e.stats.Changed()
		}
	}
	if le == unix.EBUSY && flags&unix.O_EXCL != 0 {
		fd, le = e.openExclBlock(r, t.LKLPath(), lflags, flags) // sys_file_dev.go
	}
	if le == unix.ENXIO || le == unix.ENODEV || le == unix.EBUSY {
		// A device node LKL has no driver for, or one of its disks
		// (busy: mounted): kbox decides (sys_file_dev.go).
		var st lkl.Stat64
		if lklStatUncached(t.LKLPath(), flags&unix.O_NOFOLLOW != 0, &st) == 0 && guestpath.IsDevice(st.Mode) && !lklDevice(st.Mode, st.Rdev) {
			return e.devOpen(r, st.Mode, st.Rdev, flags)
		}
	}
	if le == unix.EPERM && flags&unix.O_APPEND != 0 && flags&unix.O_ACCMODE != unix.O_RDONLY {
		return e.openAppendOnly(r, t, lflags, flags, mode)
	}
	if le != 0 {
		return errno(le, LKL)
	}
	res := e.openLKL(r, int(fd), t.Path, flags, probe)
	markQuiet(r, res, int(fd), quiet, lazy)
	return res
}

// openAppendOnly opens for writing, with O_APPEND, a file that refused an
// LKL open without it: an append-only file (chattr +a), which Linux opens
// for writing only with O_APPEND. A shadow's LKL fd writes back at
// offsets, which an LKL fd with O_APPEND cannot: the open shares a shadow
// whose LKL fd is writable already (opened before the attribute was set),
// or else it is a virtual fd, whose writes append in LKL.
func (e *Engine) openAppendOnly(r *Request, t guestpath.Target, lflags, flags int, mode uint32) Result {
	fd, le := e.lklOpen(r, t.LKLPath(), lflags|unix.O_APPEND, createMode(r, t.LKLPath(), flags, mode), flags)
	if le != 0 {
		return errno(le, LKL)
	}
	cloexec := flags&unix.O_CLOEXEC != 0
	if st, err := lkl.Fstat(int(fd)); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
		hfd, n, shared, err := e.Shadows.OpenWriter(int(fd), &st, flags)
		if err != nil {
			return fail(err, LKL) // the node closed fd
		}
		if shared {
			return giveShadow(r, hfd, flags, n)
		}
	}
	lfd := int(fd)
	if flags&unix.O_ACCMODE == unix.O_WRONLY {
		if lfd, le = e.writeOnly(r, lfd); le != 0 {
			return errno(le, LKL)
		}
	}
	gfd, err := r.P.FDs.Open(lfd, t.Path, flags, cloexec)
	if err != nil {
		return fail(err, LKL)
	}
	return ok(int64(gfd), LKL)
}

// lklOpenFlags returns the LKL open flags for a guest open with flags,
// and whether a read-only open was made non-blocking (probe).
func lklOpenFlags(flags int) (lflags int, probe bool) {
	hflags := flags &^ (unix.O_CLOEXEC | unix.O_DIRECT) // O_DIRECT: fcntl.go
	// A read-only open of a FIFO waits for a writer, which in LKL would
	// stall every guest. Opened non-blocking, a FIFO is found by the fstat
	// in openLKL and served by a host FIFO (sys_file_dev.go). Opens with write
	// access are O_RDWR in LKL (below), which never blocks.
	probe = flags&(unix.O_ACCMODE|unix.O_NONBLOCK|unix.O_PATH|unix.O_DIRECTORY) == unix.O_RDONLY
	if probe {
		hflags |= unix.O_NONBLOCK
	}
	lflags = int(lkl.OpenFlagsToLKL(uint32(hflags))) | unix.O_CLOEXEC
	if flags&unix.O_ACCMODE == unix.O_WRONLY {
		// A writable shadow is filled from the file: LKL must be able to
		// read it. A directory then fails with EISDIR, as it should.
		lflags = lflags&^unix.O_ACCMODE | unix.O_RDWR
	}
	if flags&unix.O_ACCMODE != unix.O_RDONLY {
		// The LKL fd serves write-back with pwrite at explicit offsets,
		// which O_APPEND would turn into appends; the guest's shadow fd
		// keeps O_APPEND.
		lflags &^= unix.O_APPEND
	}
	return lflags, probe
}

// openLKL gives the guest the LKL file lfd (which it takes) that an open
// with flags of guest path p made: a host FIFO, a shadow or a virtual fd.
func (e *Engine) openLKL(r *Request, lfd int, p string, flags int, probe bool) Result {
	cloexec := flags&unix.O_CLOEXEC != 0
	st, err := lkl.Fstat(lfd)
	if err != nil {
		lkl.Close(lfd)
		return fail(err, LKL)
	}
	if guestpath.IsDevice(st.Mode) && flags&unix.O_PATH == 0 && !lklDevice(st.Mode, st.Rdev) {
		// LKL's own device is never the guest's (sys_file_dev.go), but for
		// its loop devices, virtual fds (sys_io_ioctl.go).
		lkl.Close(lfd)
		return e.devOpen(r, st.Mode, st.Rdev, flags)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFIFO && flags&unix.O_PATH == 0 {
		lkl.Close(lfd)
		return e.openFIFO(r, &st, p, flags)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && flags&unix.O_PATH == 0 && !generated(lfd, &st) && e.Shadows.Shadowable(&st) {
		// A description of the inode's shadow node (shadowfd), which
		// takes the LKL fd over.
		hfd, n, err := e.Shadows.OpenLend(lfd, &st, p, flags)
		var ns *shadowfd.NotShadowedError
		if errors.As(err, &ns) {
			// The disk failed to read the file: a virtual fd, whose
			// reads get the error (below).
			probe = true
		} else if err != nil {
			return fail(err, LKL)
		} else {
			return giveShadow(r, hfd, flags, n)
		}
	}
	if flags&unix.O_ACCMODE == unix.O_WRONLY {
		var le unix.Errno
		if lfd, le = e.writeOnly(r, lfd); le != 0 {
			return errno(le, LKL)
		}
	}
	if probe {
		// Not a FIFO: a virtual fd has the status flags the guest asked
		// for, without kbox's O_NONBLOCK.
		if le := setfl(lfd, flags); le != 0 {
			lkl.Close(lfd)
			return errno(le, LKL)
		}
	}
	if flags&unix.O_APPEND != 0 && flags&unix.O_ACCMODE != unix.O_RDONLY {
		// O_APPEND was kept off the LKL fd in case it became a
		// shadow; a virtual fd writes through it.
		if le := setfl(lfd, getfl(lfd, flags)|unix.O_APPEND); le != 0 {
			lkl.Close(lfd)
			return errno(le, LKL)
		}
	}
	gfd, err := r.P.FDs.Open(lfd, p, flags, cloexec)
	if err != nil {
		return fail(err, LKL)
	}
	return ok(int64(gfd), LKL)
}

// nodeOf returns the shadow node behind guest fd fd: a host fd, or a host
// file kept in the virtual table (hostfd.go); nil for anything else.
func (e *Engine) nodeOf(r *Request, fd int) *shadowfd.Node {
	if hfd, isHost := hostFile(r, uint64(uint32(fd))); isHost {
		var st unix.Stat_t
		if unix.Fstat(hfd, &st) != nil {
			return nil
		}
		return e.Shadows.Lookup(st.Dev, st.Ino)
	}
	if r.P.FDs.IsVirtual(fd) {
		return nil
	}
	return e.Shadows.OfGuestFd(r.P.Tgid, fd)
}

// sysClose serves close(2) of virtual fds; host fds close natively.
func sysClose(e *Engine, r *Request) Result {
	// Closing a shadow's fd writes nothing (shadowfd writes nodes back on
	// fsync, at exits and in the background), so the filter lets guests
	// close host fds natively: close is notified for virtual fds. That
	// close of a host fd leaves LKL as it was (the pumps flushed report
	// their own changes): the stat cache stays valid (OwnChange), as in
	// the seccomp tier, whose guests close host fds natively. An LKL
	// file's close may change LKL, as any other syscall, when it was open
	// for writing (ext4 gives a file's last writer's unused blocks back);
	// one open read-only changes nothing a stat sees (the last close of
	// an unlinked file frees what no path names).
	fd := int(int32(r.Args[0]))
	if r.P.FDs.IsVirtual(fd) {
		if r.P.Tgid == kboxPid {
			e.unlockInProcess(fd, r.P) // sys_file_locks.go
		}
		_, isHost := hostFile(r, r.Args[0])
		ent, _ := r.P.FDs.Get(fd)
		quiet := ent.File != nil && (e.isQuiet(ent.File) || readOnlyFile(ent.File)) // cache.go
		if !quiet {
			e.stats.Changed()
		}
		dropLocks := e.closeDropsLocks(r, fd) // sys_file_locks.go
		err := r.P.FDs.Close(fd)
		if !quiet {
			e.stats.Changed()
		}
		e.notifySweep()
		if err != nil {
			return fail(err, LKL)
		}
		if isHost {
			e.flushPumps()
		}
		if dropLocks || e.kboxFdAt(r, fd) {
			return cont // the host's close drops what kbox put at fd (sys_file_locks.go)
		}
		return ok(0, LKL)
	}
	e.flushPumps()
	return cont
}

// sysCloseRange serves close_range(2).
func sysCloseRange(e *Engine, r *Request) Result {
	// The host part of the range is closed by the host kernel; the
	// virtual part here.
	r.P.FDs.CloseRange(int(uint32(r.Args[0])), int(uint32(r.Args[1])), r.Args[2]&unix.CLOSE_RANGE_CLOEXEC != 0)
	return cont
}

func lklFdIO(r *Request, nr uintptr, write bool, withOff bool) Result {
	ent, found := r.P.FDs.Get(int(int32(r.Args[0])))
	if !found {
		return errno(unix.EBADF, LKL)
	}
	if ent.File.Host {
		if v, isVar := ent.File.Node.(*procfs.Var); isVar {
			return varIO(r, v, ent.File.HostFd, write, withOff) // procfs.Var
		}
		return hostIO(r, ent.File.HostFd, write, withOff)
	}
	if ent.File.Listing != nil {
		if write {
			return errno(unix.EBADF, Emulated)
		}
		return errno(unix.EISDIR, Emulated) // a directory of /proc (package procfs)
	}
	lfd := ent.File.LKLFd
	n := r.Args[2]
	if n > 1<<20 {
		n = 1 << 20
	}
	buf := make([]byte, n)
	if write && n > 0 {
		// Like Linux, write what can be read before a fault.
		got, _ := r.G.ReadSome(r.Args[1], buf)
		if got <= 0 {
			return errno(unix.EFAULT, LKL)
		}
		buf = buf[:got]
	}
	off := uintptr(0)
	if withOff {
		off = uintptr(r.Args[3])
	}
	res, le := lkl.Syscall6(nr, uintptr(lfd), uptr(buf), uintptr(len(buf)), off, 0, 0)
	if le != 0 {
		return errno(le, LKL)
	}
	if !write && res > 0 {
		if err := r.G.Write(r.Args[1], buf[:res]); err != nil {
			if !withOff {
				unread(lfd, int64(res)) // as on Linux, the data stays to be read
			}
			return errno(unix.EFAULT, LKL)
		}
	}
	return ok(int64(res), LKL)
}

// unread moves the position of LKL fd lfd back by n bytes that a guest
// buffer could not take.
func unread(lfd int, n int64) {
	lkl.Syscall6(lkl.SysLseek, uintptr(lfd), uintptr(-n), unix.SEEK_CUR, 0, 0, 0)
}

// sysDup serves dup(2).
func sysDup(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	nfd, err := r.P.FDs.Dup(int(int32(r.Args[0])), 0, false)
	if err != nil {
		return fail(err, Emulated)
	}
	return ok(int64(nfd), Emulated)
}

// sysDup2 serves dup2(2).
func sysDup2(e *Engine, r *Request) Result { return e.dup3(r, r.Args[0], r.Args[1], 0) }

// sysDup3 serves dup3(2).
func sysDup3(e *Engine, r *Request) Result { return e.dup3(r, r.Args[0], r.Args[1], r.Args[2]) }

func (e *Engine) dup3(r *Request, oldfd, newfd, flags uint64) Result {
	ov, nv := isVirtual(r, oldfd), isVirtual(r, newfd)
	if !ov && !nv {
		// dup2 closes newfd implicitly: a pump's pipe there is flushed
		// first, as on close (the pumps report their own changes). Host
		// fds change nothing in LKL (dup2 and dup3 are OwnChange): a
		// shell's redirections keep the stat cache.
		if oldfd != newfd {
			e.flushPumps()
		}
		return cont
	}
	// A virtual fd replaced (an LKL file's last close) or bridged.
	e.stats.Changed()
	defer e.changeDone()
	switch {
	case ov && nv:
		if oldfd == newfd {
			return ok(int64(newfd), Emulated)
		}
		e.dupDropsLocks(r, int(int32(newfd))) // sys_file_locks.go
		if err := r.P.FDs.Dup2(int(int32(oldfd)), int(int32(newfd)), flags&unix.O_CLOEXEC != 0); err != nil {
			return fail(err, Emulated)
		}
		return ok(int64(newfd), Emulated)
	}
	if int32(newfd) < 0 || flags&^unix.O_CLOEXEC != 0 {
		return errno(unix.EBADF, Emulated)
	}
	if ov {
		// A virtual fd onto a host fd number: a pipe pumped by kbox
		// (bridge.go).
		ent, okk := r.P.FDs.Get(int(int32(oldfd)))
		if !okk {
			return errno(unix.EBADF, Emulated)
		}
		if v, isVar := ent.File.Node.(*procfs.Var); isVar {
			return e.bridgeVar(r, ent.File, v, int(int32(newfd)), flags&unix.O_CLOEXEC != 0) // procfs.Var
		}
		if ent.File.Host {
			// A host file kept in the virtual table (hostfd.go):
			// its copy goes back at the host number.
			return e.restoreHost(r, ent.File.HostFd, int(int32(newfd)), flags&unix.O_CLOEXEC != 0)
		}
		return e.bridge(r, ent.File, int(int32(newfd)), flags&unix.O_CLOEXEC != 0)
	}
	// A host fd onto a virtual fd number: EBADF, as the kernel answers
	// for a target beyond RLIMIT_NOFILE (bridge.go).
	return errno(unix.EBADF, Emulated)
}

// sysFsync serves fsync(2) and fdatasync(2): shadows are written back and synced in LKL.
func sysFsync(e *Engine, r *Request) Result {
	// On a shadow, the node is written back and LKL's inode synced, so the
	// data is in the image when it returns; a write-back that failed before
	// (ENOSPC, EIO) is reported here, as Linux reports writeback errors.
	fd := int(int32(r.Args[0]))
	if n := e.nodeOf(r, fd); n != nil {
		if err := e.Shadows.Fsync(n, r.Nr == unix.SYS_FDATASYNC); err != nil {
			return fail(err, LKL)
		}
		return ok(0, LKL)
	}
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	if hfd, isHost := hostFile(r, r.Args[0]); isHost {
		if err := unix.Fsync(hfd); err != nil {
			return fail(err, Host)
		}
		return ok(0, Host)
	}
	if r.Nr == unix.SYS_FDATASYNC {
		return onLKLFd(r, lkl.SysFdatasync)
	}
	return onLKLFd(r, lkl.SysFsync)
}

// sysFtruncate serves ftruncate(2).
func sysFtruncate(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	return onLKLFd(r, lkl.SysFtruncate)
}

// sysSyncfs serves syncfs(2): the fd's filesystem's shadows written back, then LKL's syncfs.
func sysSyncfs(e *Engine, r *Request) Result {
	// A write-back that failed since is reported, as Linux's syncfs
	// reports writeback errors of its filesystem.
	var lfd int
	if n := e.nodeOf(r, int(int32(r.Args[0]))); n != nil {
		lfd = n.LKLFd()
	} else if isVirtual(r, r.Args[0]) {
		var en unix.Errno
		if lfd, en = vfd(r, r.Args[0]); en != 0 {
			return errno(en, LKL)
		}
	} else {
		return cont // a host fd: the host's filesystem
	}
	st, err := lkl.Fstat(lfd)
	if err != nil {
		return fail(err, LKL)
	}
	serr := e.Shadows.SyncAll(st.Dev)
	if _, le := lkl.Syscall6(lkl.SysSyncfs, uintptr(lfd), 0, 0, 0, 0, 0); le != 0 {
		return errno(le, LKL)
	}
	if serr != nil {
		return fail(serr, LKL)
	}
	return ok(0, LKL)
}

// sysFlock serves flock(2): a host fd's on the host; a virtual fd's on a
// proxy of its file (sys_file_locks.go), but in the in-process tiers,
// one process, where it is granted.
func sysFlock(e *Engine, r *Request) Result {
	fd := int(int32(r.Args[0]))
	if !isVirtual(r, r.Args[0]) {
		return cont
	}
	ent, open := r.P.FDs.Get(fd)
	switch {
	case !open || isPathFile(ent.File):
		return errno(unix.EBADF, Emulated) // an O_PATH fd locks nothing
	case !lockable(r, fd) || r.P.Tgid == kboxPid:
		return ok(0, Emulated)
	}
	return e.lockAt(r, fd) // on a proxy of the file (sys_file_locks.go)
}

// sysFcntl serves fcntl(2) on virtual fds.
func sysFcntl(e *Engine, r *Request) Result {
	fd := int(int32(r.Args[0]))
	cmd := int(uint32(r.Args[1]))
	dupfd := cmd == unix.F_DUPFD || cmd == unix.F_DUPFD_CLOEXEC
	if !dupfd && cmd != unix.F_GETFD && cmd != unix.F_SETFD && cmd != unix.F_GETFL {
		// Only the fd's own flags and copies leave LKL as it was
		// (OwnChange): musl sets FD_CLOEXEC after every open.
		e.stats.Changed()
		defer e.changeDone()
	}
	if !r.P.FDs.IsVirtual(fd) {
		if dupfd && r.P.FDs.IsVirtual(int(uint32(r.Args[2]))) {
			// A dup of a host fd into the virtual range (hostfd.go).
			return e.dupHostHigh(r, fd, uint32(r.Args[2]), cmd == unix.F_DUPFD_CLOEXEC)
		}
		if (cmd == unix.F_ADD_SEALS || cmd == unix.F_GET_SEALS) && e.Shadows.OfGuestFd(r.P.Tgid, fd) != nil {
			// A shadow stands for an ext4 file, which has no seals
			// (its content memfd has F_SEAL_SEAL).
			return errno(unix.EINVAL, Emulated)
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
		if int32(r.Args[2]) < 0 || dupBeyond(r, int(int32(r.Args[2]))) {
			return errno(unix.EINVAL, Emulated)
		}
		nfd, err := r.P.FDs.Dup(fd, int(int32(r.Args[2])), cmd == unix.F_DUPFD_CLOEXEC)
		if err != nil {
			return fail(err, Emulated)
		}
		return ok(int64(nfd), Emulated)
	case unix.F_GETLK, unix.F_SETLK, unix.F_SETLKW, unix.F_OFD_GETLK, unix.F_OFD_SETLK, unix.F_OFD_SETLKW:
		// On the host, on a proxy of the file (sys_file_locks.go).
		switch {
		case !lockable(r, fd):
			return errno(unix.ENOLCK, Emulated)
		case r.P.Tgid == kboxPid:
			return e.lockInProcess(r, fd, cmd)
		}
		return e.lockAt(r, fd)
	}
	return errno(unix.EINVAL, Emulated)
}

// sysFallocate serves fallocate(2) on virtual fds.
func sysFallocate(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return cont // a host fd or a writable shadow: the host does it
	}
	return onLKLFd(r, lkl.SysFallocate)
}

// sysUmask serves umask(2): kept per process, continued.
func sysUmask(e *Engine, r *Request) Result {
	r.P.umask.Store(uint32(r.Args[0]) & 0o777)
	return cont // the host keeps it too and returns the old one
}
