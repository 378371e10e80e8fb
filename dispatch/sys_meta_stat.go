// The meta family's reads: stat, access, statfs (FamMeta in table.go;
// statx is sys_meta_statx.go).

package dispatch

import (
	"path"
	"runtime"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/hostdev"
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
			return e.fstatHost(r, int(dirfd), out)
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
		hostdev.Stat(hst)
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

// fstatHost answers fstat of a host fd: a shadow reports its LKL file
// (device, inode, mode, owner, times: cp checks that the file it opened is
// the one it stat'ed) with its content's current size; a file of a host
// filesystem (a bind's, a host route's) its host stat with the device
// number the guest sees (package hostdev). An object of the host kernel's
// internal filesystems (a pipe, a socket), whose stat the guest sees as
// it is, and an fd kbox cannot stat (EBADF) are left to the host.
func (e *Engine) fstatHost(r *Request, fd int, out uint64) Result {
	sc := getScratch()
	defer putScratch(sc)
	hst := &sc.st
	if shadowfd.StatGuestFd(r.P.Tgid, fd, hst) != nil {
		return cont
	}
	if n := e.Shadows.Lookup(hst.Dev, hst.Ino); n != nil {
		var st lkl.Stat64
		if err := e.Shadows.Stat(n, &st); err != nil {
			return fail(err, LKL)
		}
		return writeStat(r, &st, out)
	}
	if hostdev.Internal(hst.Dev) {
		return cont
	}
	hostdev.Stat(hst)
	if err := r.G.Write(out, asBytes(hst)); err != nil {
		return errno(unix.EFAULT, Host)
	}
	return ok(0, Host)
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
			// range): its image file, as fstatHost.
			var lst lkl.Stat64
			if err := e.Shadows.Stat(n, &lst); err != nil {
				return fail(err, LKL)
			}
			return writeStat(r, &lst, out)
		}
		hostdev.Stat(&st)
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

// sysFstat serves fstat(2), the legacy call musl's fstat makes: a host
// fd's as newfstatat's AT_EMPTY_PATH does (fstatHost: a shadow's reports
// its image file, a host file's its device as the guest sees it, a pipe's
// or socket's runs on the host), a virtual fd's is served.
func sysFstat(e *Engine, r *Request) Result {
	if !isVirtual(r, r.Args[0]) {
		return e.fstatHost(r, int(int32(r.Args[0])), r.Args[1])
	}
	return e.fstatVirtual(r, r.Args[0], r.Args[1])
}

// sysNewfstatat serves newfstatat(2).
func sysNewfstatat(e *Engine, r *Request) Result {
	return e.statPath(r, int32(r.Args[0]), r.Args[1], int(r.Args[3]), r.Args[2])
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
		hostdev.Stat(st)
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
