// The meta family's reads: stat, statx, access, statfs (FamMeta in
// table.go).

package dispatch

import (
	"encoding/binary"
	"path"
	"runtime"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/shadowfd"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// statFlags are the flags newfstatat(2) takes (the AT_STATX_SYNC_* bits,
// 0x6000, too); another is EINVAL, before the path is read.
const statFlags = unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT | unix.AT_EMPTY_PATH | 0x6000

func (e *Engine) statPath(r *Request, dirfd int32, addr uint64, flags int, out uint64) Result {
	if flags&^statFlags != 0 {
		return errno(unix.EINVAL, Emulated)
	}
	p, en := readPath(r, addr)
	if en != 0 {
		return errno(en, LKL)
	}
	if p == "" && flags&unix.AT_EMPTY_PATH != 0 {
		if !isVirtual(r, uint64(uint32(dirfd))) {
			return e.fstatShadow(r, int(dirfd), out)
		}
		return e.fstatVirtual(r, uint64(uint32(dirfd)), out)
	}
	var t guestpath.Target
	if en := e.resolveInto(r, dirfd, p, &t); en != 0 {
		return errno(en, LKL)
	}
	if flags&unix.AT_SYMLINK_NOFOLLOW == 0 {
		// /dev/fd, /dev/fd/N (sys_file_dev.go)
		if t.Fd > 0 {
			return e.statDevFd(r, t.Fd-1, out)
		}
		if t.FdDir { // (tested here: t is not copied in and out for every path)
			if t, en = e.followDev(r, t); en != 0 {
				return errno(en, Emulated)
			}
		}
	} else if t.Fd != 0 {
		if t, en = e.procFdLink(r, t); en != 0 {
			return errno(en, Emulated)
		}
	}
	sc := getScratch()
	defer putScratch(sc)
	hst := &sc.st
	if t.Proc != nil {
		if en := e.procStat(r, t, flags&unix.AT_SYMLINK_NOFOLLOW != 0, hst); en != 0 {
			return errno(en, Emulated)
		}
		if err := r.G.Write(out, asBytes(hst)); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
		return ok(0, Emulated)
	}
	if t.Host {
		nofollow := flags & unix.AT_SYMLINK_NOFOLLOW
		err := guestpath.At(t, nofollow != 0, func(d int, name string, empty int) error { return unix.Fstatat(d, name, hst, nofollow|empty) })
		if err != nil {
			return fail(err, Host)
		}
		e.procOwner(&t, &hst.Uid, &hst.Gid)
	} else {
		var st lkl.Stat64
		if le := e.lklStat(r, t.LKLPath(), flags&unix.AT_SYMLINK_NOFOLLOW != 0, &st); le != 0 {
			return errno(le, LKL)
		}
		e.Shadows.Overlay(&st) // a shadow's newer size and times
		st.ToHost(hst)
	}
	if err := r.G.Write(out, asBytes(hst)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	if t.Host {
		return ok(0, Host)
	}
	if r.Hints != nil && t.Tail == "" {
		r.sawStat(t.Path, out, nil) // hint_stat.go
	}
	return ok(0, LKL)
}

// fstatShadow answers fstat of a host fd: a shadow reports its LKL file
// (device, inode, mode, owner, times: cp checks that the file it opened is
// the one it stat'ed) with its content's current size; anything else runs
// on the host.
func (e *Engine) fstatShadow(r *Request, fd int, out uint64) Result {
	n := e.Shadows.OfGuestFd(r.P.Tgid, fd)
	if n == nil {
		return cont
	}
	var st lkl.Stat64
	if err := e.Shadows.Stat(n, &st); err != nil {
		return fail(err, LKL)
	}
	return writeStat(r, &st, out)
}

// writeStat converts an LKL stat and writes it to the guest at out.
func writeStat(r *Request, st *lkl.Stat64, out uint64) Result {
	sc := getScratch()
	defer putScratch(sc)
	st.ToHost(&sc.st)
	if err := r.G.Write(out, asBytes(&sc.st)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// lklStatUncached is newfstatat in LKL, relative to its root.
func lklStatUncached(path string, nofollow bool, st *lkl.Stat64) unix.Errno {
	sc := getScratch()
	defer putScratch(sc)
	b := sc.cstring(path)
	flags := 0
	if nofollow {
		flags = unix.AT_SYMLINK_NOFOLLOW
	}
	_, le := lkl.Syscall6(lkl.SysNewfstatat, atFdcwd, uptr(b), lkl.PtrOf(&sc.lst), uintptr(flags), 0, 0)
	runtime.KeepAlive(b)
	*st = sc.lst // the caller's st may be on its stack: LKL writes the pooled one
	return le
}

func (e *Engine) fstatVirtual(r *Request, fd, out uint64) Result {
	if l, p := listingOf(r, fd); l != nil {
		sc := getScratch()
		defer putScratch(sc)
		if en := e.statListing(r, p, &sc.st); en != 0 {
			return errno(en, Emulated)
		}
		if err := r.G.Write(out, asBytes(&sc.st)); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
		return ok(0, Emulated)
	}
	if hfd, isHost := hostFile(r, fd); isHost {
		var st unix.Stat_t
		if err := unix.Fstat(hfd, &st); err != nil {
			return fail(err, Host)
		}
		if n := e.Shadows.Lookup(st.Dev, st.Ino); n != nil {
			// A copy of a shadow's fd (F_DUPFD into the virtual
			// range): its image file, as fstatShadow.
			var lst lkl.Stat64
			if err := e.Shadows.Stat(n, &lst); err != nil {
				return fail(err, LKL)
			}
			return writeStat(r, &lst, out)
		}
		if err := r.G.Write(out, asBytes(&st)); err != nil {
			return errno(unix.EFAULT, Host)
		}
		return ok(0, Host)
	}
	lfd, en := vfd(r, fd)
	if en != 0 {
		return errno(en, LKL)
	}
	st, err := lkl.Fstat(lfd)
	if err != nil {
		return fail(err, LKL)
	}
	return writeStat(r, &st, out)
}

// sysStat serves stat(2).
func sysStat(e *Engine, r *Request) Result {
	return e.statPath(r, unix.AT_FDCWD, r.Args[0], 0, r.Args[1])
}

// sysLstat serves lstat(2).
func sysLstat(e *Engine, r *Request) Result {
	return e.statPath(r, unix.AT_FDCWD, r.Args[0], unix.AT_SYMLINK_NOFOLLOW, r.Args[1])
}

// sysFstat serves fstat(2), the legacy call musl's fstat makes: a
// shadow's reports its image file as newfstatat's AT_EMPTY_PATH does
// (fstatShadow), a virtual fd's is served, other host fds' run on the
// host.
func sysFstat(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return e.fstatShadow(r, int(int32(r.Args[0])), r.Args[1])
	}
	return e.fstatVirtual(r, r.Args[0], r.Args[1])
}

// sysNewfstatat serves newfstatat(2).
func sysNewfstatat(e *Engine, r *Request) Result {
	return e.statPath(r, int32(r.Args[0]), r.Args[1], int(r.Args[3]), r.Args[2])
}

// Offsets in struct statx.
const (
	statxInoOff    = 32
	statxSizeOff   = 40
	statxBlocksOff = 48
	statxAtimeOff  = 64
	statxCtimeOff  = 96
	statxMtimeOff  = 112
	statxDevOff    = 136
)

// statxOverlay puts a shadow's size, blocks and times (st, from
// shadowfd.Manager.Stat) into a statx buffer.
func statxOverlay(buf []byte, st *lkl.Stat64) {
	le := binary.LittleEndian
	le.PutUint64(buf[statxSizeOff:], uint64(st.Size))
	le.PutUint64(buf[statxBlocksOff:], uint64(st.Blocks))
	le.PutUint64(buf[statxAtimeOff:], uint64(st.Atime))
	le.PutUint32(buf[statxAtimeOff+8:], uint32(st.AtimeNsec))
	le.PutUint64(buf[statxCtimeOff:], uint64(st.Ctime))
	le.PutUint32(buf[statxCtimeOff+8:], uint32(st.CtimeNsec))
	le.PutUint64(buf[statxMtimeOff:], uint64(st.Mtime))
	le.PutUint32(buf[statxMtimeOff+8:], uint32(st.MtimeNsec))
}

// statxShadow corrects a statx of an image path whose file has a shadow
// (see Manager.Overlay); nothing is done while no shadow exists.
func (e *Engine) statxShadow(buf []byte) {
	le := binary.LittleEndian
	st := lkl.Stat64{
		Dev: unix.Mkdev(le.Uint32(buf[statxDevOff:]), le.Uint32(buf[statxDevOff+4:])),
		Ino: le.Uint64(buf[statxInoOff:]),
	}
	if n := e.Shadows.OfInode(st.Dev, st.Ino); n != nil && e.Shadows.Stat(n, &st) == nil {
		statxOverlay(buf, &st)
	}
}

// sysStatx serves statx(2).
func sysStatx(e *Engine, r *Request) Result {
	dirfd, flags := int32(r.Args[0]), int(r.Args[2])
	p, en := readPath(r, r.Args[1])
	if en != 0 {
		return errno(en, LKL)
	}
	sc := getScratch() // LKL writes it: heap memory, not this frame
	defer putScratch(sc)
	buf := &sc.sx
	if p == "" && flags&unix.AT_EMPTY_PATH != 0 {
		if res, done := e.statxFd(r, int(dirfd), flags, buf[:], false); done {
			return res
		}
	} else {
		var t guestpath.Target
		if en := e.resolveInto(r, dirfd, p, &t); en != 0 {
			return errno(en, LKL)
		}
		switch {
		case flags&unix.AT_SYMLINK_NOFOLLOW == 0 && t.FdDir:
			t, en = e.followDev(r, t)
		case flags&unix.AT_SYMLINK_NOFOLLOW != 0 && t.Fd != 0:
			t, en = e.procFdLink(r, t)
		}
		if en != 0 {
			return errno(en, Emulated)
		}
		if t.Proc != nil {
			return e.statxProc(r, t, "", flags&unix.AT_SYMLINK_NOFOLLOW != 0)
		}
		if t.Fd > 0 && flags&unix.AT_SYMLINK_NOFOLLOW == 0 {
			// /dev/fd/N (sys_file_dev.go): the file fd N is.
			if res, done := e.statxFd(r, t.Fd-1, flags&^unix.AT_EMPTY_PATH, buf[:], true); done {
				return res
			}
		} else if t.Host {
			var sx unix.Statx_t
			err := guestpath.At(t, flags&unix.AT_SYMLINK_NOFOLLOW != 0, func(d int, name string, empty int) error {
				return unix.Statx(d, name, flags&^unix.AT_EMPTY_PATH|empty, int(r.Args[3]), &sx)
			})
			if err != nil {
				return fail(err, Host)
			}
			e.procOwner(&t, &sx.Uid, &sx.Gid)
			copy(buf[:], asBytes(&sx))
		} else {
			cred, wb, gen := e.factKey(r)
			lp := t.LKLPath()
			_, le := lklPath(lkl.SysStatx, 1, lp, [6]uintptr{atFdcwd, 0, uintptr(flags &^ unix.AT_EMPTY_PATH), uintptr(r.Args[3]), uptr(buf[:])})
			runtime.KeepAlive(buf)
			if le != 0 {
				return errno(le, LKL)
			}
			e.noteStatx(cred, wb, gen, lp, flags&unix.AT_SYMLINK_NOFOLLOW != 0, buf[:])
			e.statxShadow(buf[:])
			if r.Hints != nil && (p[0] == '/' || dirfd == unix.AT_FDCWD) {
				e.armXattrHint(r, p, &t, flags&unix.AT_SYMLINK_NOFOLLOW != 0, cred, wb, gen) // hint.go
			}
			if r.Hints != nil && t.Tail == "" {
				r.sawStat(t.Path, r.Args[4], &StatxKind{true, uint32(flags), uint32(r.Args[3])}) // hint_stat.go
			}
		}
	}
	if err := r.G.Write(r.Args[4], buf[:]); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// statxFd fills buf with statx of guest fd fd for statx(fd, "",
// AT_EMPTY_PATH), or for a path through /dev/fd/N (alias). It is done when
// it answered: with an error, or by continuing a host fd's own statx
// (never for alias, which names the file through kbox's /proc link).
func (e *Engine) statxFd(r *Request, fd int, flags int, buf []byte, alias bool) (Result, bool) {
	lfd := -1
	var node *shadowfd.Node
	mask := int(r.Args[3])
	hostStatx := func(dirfd int, name string, fl int) (Result, bool) {
		var sx unix.Statx_t
		if err := unix.Statx(dirfd, name, fl, mask, &sx); err != nil {
			if alias && (err == unix.EBADF || err == unix.ENOENT) {
				err = unix.ENOENT
			}
			return fail(err, Host), true
		}
		copy(buf, asBytes(&sx))
		return Result{}, false
	}
	if !isVirtual(r, uint64(uint32(fd))) {
		// A shadow reports its LKL file (see fstatShadow).
		if node = e.Shadows.OfGuestFd(r.P.Tgid, fd); node == nil {
			if !alias {
				return cont, true
			}
			if fd < 0 {
				return errno(unix.ENOENT, Host), true
			}
			return hostStatx(unix.AT_FDCWD, fdLink(r, fd), flags&^unix.AT_SYMLINK_NOFOLLOW)
		}
		lfd = node.LKLFd()
	} else {
		if _, lp := listingOf(r, uint64(uint32(fd))); lp != "" {
			return e.statxProc(r, guestpath.Target{}, lp, false), true // a directory of /proc
		}
		hfd, isHost := hostFile(r, uint64(uint32(fd)))
		if isHost {
			// A copy of a shadow's fd reports its LKL file too.
			if node = e.Shadows.OfHostFd(hfd); node == nil {
				return hostStatx(hfd, "", flags|unix.AT_EMPTY_PATH)
			}
			lfd = node.LKLFd()
		} else {
			var en unix.Errno
			if lfd, en = vfd(r, uint64(uint32(fd))); en != 0 {
				if alias && en == unix.EBADF {
					en = unix.ENOENT
				}
				return errno(en, LKL), true
			}
		}
	}
	empty := []byte{0}
	_, le := lkl.Syscall6(lkl.SysStatx, uintptr(lfd), uptr(empty), uintptr(flags|unix.AT_EMPTY_PATH), uintptr(mask), uptr(buf), 0)
	runtime.KeepAlive(empty)
	if le != 0 {
		return errno(le, LKL), true
	}
	if node != nil {
		var st lkl.Stat64
		if err := e.Shadows.Stat(node, &st); err == nil {
			statxOverlay(buf, &st)
		}
	}
	return Result{}, false
}

func (e *Engine) access(r *Request, dirfd int32, addr uint64, mode, flags int) Result {
	p, en := readPath(r, addr)
	if en != 0 {
		return errno(en, LKL)
	}
	var t guestpath.Target
	if en := e.resolveInto(r, dirfd, p, &t); en != 0 {
		return errno(en, LKL)
	}
	if flags&unix.AT_SYMLINK_NOFOLLOW == 0 {
		// /dev/fd, /dev/fd/N (sys_file_dev.go)
		if t.Fd > 0 {
			return e.accessFd(r, t.Fd-1, mode, flags)
		}
		if t.FdDir {
			if t, en = e.followDev(r, t); en != 0 {
				return errno(en, Emulated)
			}
		}
	}
	return e.accessResolved(r, t, mode, flags)
}

// accessResolved is access(2) of a resolved target.
func (e *Engine) accessResolved(r *Request, t guestpath.Target, mode, flags int) Result {
	var en unix.Errno
	d := LKL
	switch {
	case t.Proc != nil:
		en, d = e.procAccess(r, t, mode), Emulated
	case t.Host:
		en, d = e.accessTarget(r, t, mode, flags), Host
	default:
		en = e.accessTarget(r, t, mode, flags)
	}
	if en != 0 {
		return errno(en, d)
	}
	return ok(0, d)
}

// accessTarget is access(2) of a host or image target.
func (e *Engine) accessTarget(r *Request, t guestpath.Target, mode, flags int) unix.Errno {
	if t.Host {
		if t.Bind != nil && t.Bind.ReadOnly && mode&unix.W_OK != 0 {
			return unix.EROFS
		}
		return sysabi.Errno(guestpath.At(t, false, func(d int, name string, empty int) error { return unix.Faccessat2(d, name, uint32(mode), empty) }))
	}
	return lklAccess(r, t.LKLPath(), mode, flags)
}

// sysAccess serves access(2).
func sysAccess(e *Engine, r *Request) Result {
	return e.access(r, unix.AT_FDCWD, r.Args[0], int(r.Args[1]), 0)
}

// sysFaccessat serves faccessat(2).
func sysFaccessat(e *Engine, r *Request) Result {
	return e.access(r, int32(r.Args[0]), r.Args[1], int(r.Args[2]), 0)
}

// sysFaccessat2 serves faccessat2(2).
func sysFaccessat2(e *Engine, r *Request) Result {
	return e.access(r, int32(r.Args[0]), r.Args[1], int(r.Args[2]), int(r.Args[3]))
}

func (e *Engine) readlink(r *Request, dirfd int32, addr, buf, size uint64) Result {
	t, en := e.target(r, dirfd, addr)
	if en == 0 {
		t, en = e.procFdLink(r, t) // /dev/fd/N (sys_file_dev.go)
	}
	if en != 0 {
		return errno(en, LKL)
	}
	out := make([]byte, min(size, PathMax))
	var n int
	if t.Proc != nil {
		// cwd, root, exe, fd/N, self...: guest paths (procserve.go).
		l, en := e.procReadlink(r, t)
		if en != 0 {
			return errno(en, Emulated)
		}
		n = copy(out, l)
	} else if t.Host {
		err := guestpath.At(t, true, func(d int, name string, _ int) (err error) {
			n, err = unix.Readlinkat(d, name, out)
			if err == unix.ENOENT && name == "" {
				// A bind's O_PATH fd of something that exists but
				// is not a symlink: readlink(2) says EINVAL.
				err = unix.EINVAL
			}
			return err
		})
		if err != nil {
			return fail(err, Host)
		}
	} else {
		res, le := lklPath(lkl.SysReadlinkat, 1, t.LKLPath(), [6]uintptr{atFdcwd, 0, uptr(out), uintptr(len(out))})
		runtime.KeepAlive(out)
		if le != 0 {
			return errno(le, LKL) // nothing read: no access time moved
		}
		e.linkRead(r, t.LKLPath()) // the link's access time (OwnChange; cache.go)
		n = int(res)
	}
	if err := r.G.Write(buf, out[:n]); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(int64(n), LKL)
}

// sysStatfs serves statfs(2) from LKL.
func sysStatfs(e *Engine, r *Request) Result {
	// The layout of struct statfs is the same (120 bytes) in LKL and on
	// x86_64.
	e.Shadows.FlushDirty() // LKL's free space counts what guests wrote
	t, en := e.target(r, unix.AT_FDCWD, r.Args[0])
	if en == 0 {
		t, en = e.followDevFd(r, t) // /dev/fd, /dev/fd/N (sys_file_dev.go)
	}
	if en != 0 {
		return errno(en, LKL)
	}
	var sf unix.Statfs_t
	if t.Proc != nil {
		if t, en = e.procStatfs(r, t, &sf); en != 0 {
			return errno(en, Emulated)
		}
		if t.Proc != nil {
			if err := r.G.Write(r.Args[1], asBytes(&sf)); err != nil {
				return errno(unix.EFAULT, Emulated)
			}
			return ok(0, Emulated)
		}
	}
	if t.Host {
		fd, err := guestpath.OpenHost(t, unix.O_PATH, 0)
		if err != nil {
			return fail(err, Host)
		}
		err = unix.Fstatfs(fd, &sf)
		unix.Close(fd)
		if err != nil {
			return fail(err, Host)
		}
		if t.Bind != nil && t.Bind.ReadOnly {
			sf.Flags |= unix.ST_RDONLY
		}
		if err := r.G.Write(r.Args[1], asBytes(&sf)); err != nil {
			return errno(unix.EFAULT, Host)
		}
		return ok(0, Host)
	}
	if _, le := lklPath(lkl.SysStatfs, 0, t.LKLPath(), [6]uintptr{0, lkl.PtrOf(&sf)}); le != 0 {
		return errno(le, LKL)
	}
	if err := r.G.Write(r.Args[1], asBytes(&sf)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// sysFstatfs serves fstatfs(2): LKL's for shadows and virtual fds, the host's for other host fds.
func sysFstatfs(e *Engine, r *Request) Result {
	// A shadow's filesystem is its file's, in LKL (not the host's tmpfs of
	// its content); other host fds are the host's.
	var lfd int
	if l, _ := listingOf(r, r.Args[0]); l != nil {
		var sf unix.Statfs_t
		if err := unix.Statfs("/proc", &sf); err != nil {
			return fail(err, Host)
		}
		if err := r.G.Write(r.Args[1], asBytes(&sf)); err != nil {
			return errno(unix.EFAULT, Emulated)
		}
		return ok(0, Emulated)
	}
	if n := e.nodeOf(r, int(int32(r.Args[0]))); n != nil {
		e.Shadows.FlushDirty()
		lfd = n.LKLFd()
	} else if !isVirtual(r, r.Args[0]) {
		return cont
	} else {
		var en unix.Errno
		if lfd, en = vfd(r, r.Args[0]); en != 0 {
			return errno(en, LKL)
		}
	}
	var sf unix.Statfs_t
	if _, le := lkl.Syscall6(lkl.SysFstatfs, uintptr(lfd), lkl.PtrOf(&sf), 0, 0, 0, 0); le != 0 {
		return errno(le, LKL)
	}
	if err := r.G.Write(r.Args[1], asBytes(&sf)); err != nil {
		return errno(unix.EFAULT, LKL)
	}
	return ok(0, LKL)
}

// enterableDir checks what chdir and chroot both require of their
// target: a directory (ENOTDIR), and for an image path one the caller
// may search (LKL's EACCES). A bind's host directory is searched by the
// host when it is used. It gives false and the error to return.
func enterableDir(r *Request, t guestpath.Target) (Result, bool) {
	if t.Host {
		var st unix.Stat_t
		if err := guestpath.At(t, false, func(d int, name string, empty int) error { return unix.Fstatat(d, name, &st, empty) }); err != nil {
			return fail(err, Host), false
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return errno(unix.ENOTDIR, Host), false
		}
		return Result{}, true
	}
	st, err := lkl.Stat(t.LKLPath(), false)
	if err != nil {
		return fail(err, LKL), false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errno(unix.ENOTDIR, LKL), false
	}
	if le := lklAccess(r, t.LKLPath(), unix.X_OK, unix.AT_EACCESS); le != 0 {
		return errno(le, LKL), false
	}
	return Result{}, true
}

func (e *Engine) chdirTo(r *Request, t guestpath.Target) Result {
	if t.Proc != nil {
		return e.procChdir(r, t)
	}
	if res, good := enterableDir(r, t); !good {
		return res
	}
	if t.Host {
		r.P.SetCwd(t.Path)
		return ok(0, Host)
	}
	// The working directory is the directory, not the way to it: getcwd
	// and ".." after chdir through a symlink give the directory's own
	// path, as on Linux. A link that leads out to a route (which LKL
	// would not follow there) keeps the path as given.
	cwd := t.Path
	if r.P.chroot() != "" {
		r.P.SetCwd(cwd) // followRooted resolved it in the process's root
		return ok(0, LKL)
	}
	if real, okk := lklRealpath(t.Path); okk && real != cwd {
		if _, routed := e.route(real); !routed && e.bindOf(real) == nil {
			cwd = real
		}
	}
	r.P.SetCwd(cwd)
	return ok(0, LKL)
}

// lklRealpath resolves the symlinks of clean absolute path p in LKL's
// tree; false when a component cannot be read or links nest too deep.
func lklRealpath(p string) (string, bool) {
	rest := strings.Split(strings.TrimPrefix(p, "/"), "/")
	done := "/"
	buf := make([]byte, PathMax)
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		cand := path.Join(done, c)
		n, le := lklPath(lkl.SysReadlinkat, 1, cand, [6]uintptr{atFdcwd, 0, uptr(buf), uintptr(len(buf))})
		runtime.KeepAlive(buf)
		switch {
		case le == unix.EINVAL: // not a link
			done = cand
			continue
		case le != 0:
			return "", false
		}
		if links++; links > 40 {
			return "", false
		}
		target := string(buf[:n])
		if strings.HasPrefix(target, "/") {
			done = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return done, true
}

// listingOf returns the generated directory (package procfs) behind virtual fd
// fd and its guest path, if it is one.
func listingOf(r *Request, fd uint64) (*fdtable.Listing, string) {
	ent, found := r.P.FDs.Get(int(int32(fd)))
	if !found || ent.File.Listing == nil {
		return nil, ""
	}
	return ent.File.Listing, ent.File.Path
}

// statListing stats the generated directory at guest path p.
func (e *Engine) statListing(r *Request, p string, st *unix.Stat_t) unix.Errno {
	t, en := e.classify(r, p)
	if en != 0 {
		return en
	}
	return e.statTarget(r, t, false, st)
}

// statxProc answers statx of a node of /proc (or, p set, of the
// generated directory at p), from its stat.
func (e *Engine) statxProc(r *Request, t guestpath.Target, p string, nofollow bool) Result {
	var st unix.Stat_t
	var en unix.Errno
	if p != "" {
		en = e.statListing(r, p, &st)
	} else {
		en = e.procStat(r, t, nofollow, &st)
	}
	if en != 0 {
		return errno(en, Emulated)
	}
	sx := statxOf(&st)
	if err := r.G.Write(r.Args[4], asBytes(&sx)); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	return ok(0, Emulated)
}

// statxOf fills a statx with what a stat has (STATX_BASIC_STATS).
func statxOf(st *unix.Stat_t) unix.Statx_t {
	ts := func(t unix.Timespec) unix.StatxTimestamp {
		return unix.StatxTimestamp{Sec: t.Sec, Nsec: uint32(t.Nsec)}
	}
	return unix.Statx_t{
		Mask:       unix.STATX_BASIC_STATS,
		Blksize:    uint32(st.Blksize),
		Nlink:      uint32(st.Nlink),
		Uid:        st.Uid,
		Gid:        st.Gid,
		Mode:       uint16(st.Mode),
		Ino:        st.Ino,
		Size:       uint64(st.Size),
		Blocks:     uint64(st.Blocks),
		Atime:      ts(st.Atim),
		Ctime:      ts(st.Ctim),
		Mtime:      ts(st.Mtim),
		Rdev_major: unix.Major(st.Rdev),
		Rdev_minor: unix.Minor(st.Rdev),
		Dev_major:  unix.Major(st.Dev),
		Dev_minor:  unix.Minor(st.Dev),
	}
}

// statTarget stats any resolved target: a node, a host path or an image
// path (with its shadow's newer size and times).
func (e *Engine) statTarget(r *Request, t guestpath.Target, nofollow bool, st *unix.Stat_t) unix.Errno {
	switch {
	case t.Proc != nil:
		return e.procStat(r, t, nofollow, st)
	case t.Host:
		flags := 0
		if nofollow {
			flags = unix.AT_SYMLINK_NOFOLLOW
		}
		err := guestpath.At(t, nofollow, func(d int, name string, empty int) error { return unix.Fstatat(d, name, st, flags|empty) })
		if err != nil {
			return sysabi.Errno(err)
		}
		e.procOwner(&t, &st.Uid, &st.Gid)
		return 0
	}
	var lst lkl.Stat64
	if le := e.lklStat(r, t.LKLPath(), nofollow, &lst); le != 0 {
		return le
	}
	e.Shadows.Overlay(&lst)
	lst.ToHost(st)
	return 0
}

// sysfsMagic is sysfs's f_type.
const sysfsMagic = 0x62656572

// generatedSize reports what a sysfs attribute's stat looks like: a page
// of size and no blocks. Only such files are asked for their filesystem
// (generated).
func generatedSize(st *lkl.Stat64) bool { return st.Size == 4096 && st.Blocks == 0 }

// generated reports a regular file of LKL's sysfs, open at lfd: its text
// is made at each read (a loop device's size and backing file change
// with its ioctls, its stat does not), so it is served as a virtual fd,
// read through LKL, never as a shadow, whose cached copy would go stale.
func generated(lfd int, st *lkl.Stat64) bool {
	if !generatedSize(st) {
		return false
	}
	var sf unix.Statfs_t
	if _, le := lkl.Syscall6(lkl.SysFstatfs, uintptr(lfd), lkl.PtrOf(&sf), 0, 0, 0, 0); le != 0 {
		return false
	}
	return sf.Type == sysfsMagic
}
