// The file family's handlers of names: made, removed, renamed and linked;
// mounts; the working directory; readlink (FamFile in table.go).

package dispatch

import (
	"runtime"
	"time"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/loopdev"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// lklOnly resolves a path argument that must name an image path; host
// routes refuse modification.
func (e *Engine) lklOnly(r *Request, dirfd int32, addr uint64) (string, Result, bool) {
	t, en := e.target(r, dirfd, addr)
	if en != 0 {
		return "", errno(en, LKL), false
	}
	if t.Host || t.Fd > 0 || t.FdDir {
		return "", errno(unix.EACCES, Denied), false
	}
	return t.LKLPath(), Result{}, true
}

// modTarget resolves a path argument that names an image path or a path in
// a bind (see resolve.go); system routes refuse modification.
func (e *Engine) modTarget(r *Request, dirfd int32, addr uint64) (guestpath.Target, Result, bool) {
	t, en := e.target(r, dirfd, addr)
	if en != 0 {
		return t, errno(en, LKL), false
	}
	if res, refused := modRefused(&t); refused {
		return t, res, false
	}
	return t, Result{}, true
}

// modRefused refuses a change of t when it is a system route, or /dev/fd
// or /dev/std* (LKL would follow them into its own proc,
// sys_file_dev.go), unless followed first (sys_meta_fdlink.go).
func modRefused(t *guestpath.Target) (Result, bool) {
	if t.Host && t.Bind == nil || t.Fd > 0 || t.FdDir {
		return errno(unix.EACCES, Denied), true
	}
	return Result{}, false
}

// pathOp runs LKL syscall nr with the resolved path at position 1 after
// AT_FDCWD, and extra arguments after it; in a bind, the host equivalent.
func (e *Engine) pathOp(r *Request, nr uintptr, dirfd int32, addr uint64, rest ...uintptr) Result {
	return e.pathOpOn(r, nr, dirfd, addr, 0, rest...)
}

// What a path syscall does to a file that may have a shadow node.
type pathEffect uint8

const (
	setsTimes pathEffect = iota + 1 // utimensat: write back first, then the times are the last word
	removes                         // unlinkat: an idle node of the file goes, freeing its space
)

// pathOpOn is pathOp for a syscall with an effect on the file's shadow:
// the last argument in rest holds its AT_SYMLINK_NOFOLLOW flag.
func (e *Engine) pathOpOn(r *Request, nr uintptr, dirfd int32, addr uint64, effect pathEffect, rest ...uintptr) Result {
	t, en := e.target(r, dirfd, addr)
	if en != 0 {
		return errno(en, LKL)
	}
	return e.pathOpAt(r, t, followsLink(r), nr, effect, rest)
}

// pathOpAt is pathOpOn on the resolved target t. A call that follows the
// last link (follow) follows an fd's link to its file (sys_meta_fdlink.go).
func (e *Engine) pathOpAt(r *Request, t guestpath.Target, follow bool, nr uintptr, effect pathEffect, rest []uintptr) (res Result) {
	if follow && (t.Fd > 0 || t.Proc != nil) {
		lt, ref, en := e.linkedTarget(r, t)
		switch {
		case en != 0:
			return errno(en, LKL)
		case ref != nil:
			return e.fdLinkOp(nr, ref, effect, rest)
		}
		t = lt
	}
	if res, refused := modRefused(&t); refused {
		return res
	}
	if nr == lkl.SysUnlinkat && rest[0]&unix.AT_REMOVEDIR != 0 {
		defer func() {
			if res.Errno == 0 {
				e.removedDir(t.Path)
			}
		}()
	}
	if t.Bind != nil {
		return bindOp(t, nr, rest)
	}
	p := t.LKLPath()
	var node *shadowfd.Node
	switch effect {
	case setsTimes:
		if node = e.nodeAt(p, rest[len(rest)-1]&unix.AT_SYMLINK_NOFOLLOW != 0); node != nil {
			if err := e.Shadows.Sync(node); err != nil {
				return fail(err, LKL)
			}
		}
	case removes:
		node = e.nodeAt(p, true)
	}
	sockGone := e.sockGoes(p, effect == removes)
	a := [6]uintptr{atFdcwd}
	copy(a[2:], rest)
	if _, le := lklPath(nr, 1, p, a); le != 0 {
		return errno(le, LKL)
	}
	sockGone()
	switch {
	case node == nil:
	case effect == setsTimes:
		e.Shadows.TimesSet(node)
	case effect == removes:
		e.Shadows.Unlinked(node)
	}
	return ok(0, LKL)
}

// nodeAt returns the shadow node of the image file at p, if it has one.
func (e *Engine) nodeAt(p string, nofollow bool) *shadowfd.Node {
	if !e.Shadows.Any() {
		return nil
	}
	var st lkl.Stat64
	if lklStatUncached(p, nofollow, &st) != 0 {
		return nil
	}
	return e.Shadows.OfInode(st.Dev, st.Ino)
}

// createOp is pathOp for mkdir and mknod, whose mode the guest's umask
// governs (proc.go): taken out of it for LKL; in a bind, the host applies
// it, kbox's umask set to the guest's for the call.
func (e *Engine) createOp(r *Request, nr uintptr, dirfd int32, addr uint64, mode uint64, rest ...uintptr) Result {
	t, res, okk := e.modTarget(r, dirfd, addr)
	if !okk {
		return res
	}
	args := append([]uintptr{uintptr(mode)}, rest...)
	if t.Bind != nil {
		withUmask(r.P.umask.Load(), func() { res = bindOp(t, nr, args) })
		return res
	}
	args[0] = umasked(r, t.LKLPath(), mode)
	a := [6]uintptr{atFdcwd}
	copy(a[2:], args)
	if _, le := lklPath(nr, 1, t.LKLPath(), a); le != 0 {
		return errno(le, LKL)
	}
	if nr == lkl.SysMknodat && mode&unix.S_IFMT == unix.S_IFSOCK {
		e.sockNodeNew(t.LKLPath()) // a socket file no socket is bound to
	}
	return ok(0, LKL)
}

// sysMkdir serves mkdir(2).
func sysMkdir(e *Engine, r *Request) Result {
	return e.createOp(r, lkl.SysMkdirat, unix.AT_FDCWD, r.Args[0], r.Args[1])
}

// sysMkdirat serves mkdirat(2).
func sysMkdirat(e *Engine, r *Request) Result {
	return e.createOp(r, lkl.SysMkdirat, int32(r.Args[0]), r.Args[1], r.Args[2])
}

// sysRmdir serves rmdir(2).
func sysRmdir(e *Engine, r *Request) Result {
	if res, done := e.rmdirDots(r, unix.AT_FDCWD, r.Args[0]); done {
		return res
	}
	return e.pathOp(r, lkl.SysUnlinkat, unix.AT_FDCWD, r.Args[0], unix.AT_REMOVEDIR)
}

// sysUnlink serves unlink(2).
func sysUnlink(e *Engine, r *Request) Result {
	return e.pathOpOn(r, lkl.SysUnlinkat, unix.AT_FDCWD, r.Args[0], removes, 0)
}

// sysUnlinkat serves unlinkat(2).
func sysUnlinkat(e *Engine, r *Request) Result {
	if r.Args[2]&unix.AT_REMOVEDIR != 0 {
		if res, done := e.rmdirDots(r, int32(r.Args[0]), r.Args[1]); done {
			return res
		}
	}
	return e.pathOpOn(r, lkl.SysUnlinkat, int32(r.Args[0]), r.Args[1], removes, uintptr(r.Args[2]))
}

// sysTruncate serves truncate(2).
func sysTruncate(e *Engine, r *Request) Result {
	t, res, okk := e.modTarget(r, unix.AT_FDCWD, r.Args[0])
	if !okk {
		return res
	}
	if t.Bind != nil {
		return bindOp(t, lkl.SysTruncate, []uintptr{uintptr(r.Args[1])})
	}
	p := t.LKLPath()
	if res, over := fsizeExceeded(r, p, int64(r.Args[1])); over {
		return res
	}
	if _, le := lklPath(lkl.SysTruncate, 0, p, [6]uintptr{0, uintptr(r.Args[1])}); le != 0 {
		return errno(le, LKL)
	}
	// Every open description of the file sees the new size.
	var st lkl.Stat64
	if lklStatUncached(p, false, &st) == 0 {
		if err := e.Shadows.Truncated(&st); err != nil {
			return fail(err, LKL)
		}
	}
	return ok(0, LKL)
}

// fsizeExceeded applies the caller's RLIMIT_FSIZE to a truncate that
// grows the LKL file at p to size (LKL knows no guest's limits): as Linux
// does, the thread gets SIGXFSZ and the call EFBIG. Other errors (the
// file's access, EISDIR) are LKL's to report first, so it only looks at a
// regular file the caller may write.
func fsizeExceeded(r *Request, p string, size int64) (Result, bool) {
	var lim unix.Rlimit
	if unix.Prlimit(r.P.Tgid, unix.RLIMIT_FSIZE, nil, &lim) != nil || lim.Cur == unix.RLIM_INFINITY || size < 0 || uint64(size) <= lim.Cur {
		return Result{}, false
	}
	var st lkl.Stat64
	if lklStatUncached(p, false, &st) != 0 || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size >= size {
		return Result{}, false
	}
	if _, le := lklPath(lkl.SysFaccessat, 1, p, [6]uintptr{atFdcwd, 0, unix.W_OK}); le != 0 {
		return Result{}, false
	}
	raise(r.G, r.P.Tgid, r.G.Pid(), unix.SIGXFSZ)
	return errno(unix.EFBIG, Emulated), true
}

// sysMknod serves mknod(2).
func sysMknod(e *Engine, r *Request) Result {
	return e.createOp(r, lkl.SysMknodat, unix.AT_FDCWD, r.Args[0], r.Args[1], uintptr(r.Args[2]))
}

// sysMknodat serves mknodat(2).
func sysMknodat(e *Engine, r *Request) Result {
	return e.createOp(r, lkl.SysMknodat, int32(r.Args[0]), r.Args[1], r.Args[2], uintptr(r.Args[3]))
}

// utimens serves utimensat and its older forms: the times ts (nil: now) of
// the file at path (pathAddr 0: of fd dirfd itself).
func (e *Engine) utimens(r *Request, dirfd int32, pathAddr uint64, ts *[2]unix.Timespec, flags uintptr) Result {
	tsp := uintptr(0)
	if ts != nil {
		tsp = lkl.PtrOf(ts)
		defer keepTimes(ts)
	}
	if pathAddr == 0 { // futimens(fd)
		fd := uint64(uint32(dirfd))
		if !isVirtual(r, fd) {
			if e.roHostFd(r, int(dirfd)) {
				return errno(unix.EROFS, Host)
			}
			n := e.Shadows.OfGuestFd(r.P.Tgid, int(dirfd))
			if n == nil {
				return cont
			}
			// Times of a shadow belong to its LKL file. What was
			// written so far goes first, so that the times set now are
			// the last word (a write-back sets LKL's mtime to the
			// content's): cp -p, touch -d, tar.
			if err := e.Shadows.Sync(n); err != nil {
				return fail(err, LKL)
			}
			if _, le := lkl.Syscall6(lkl.SysUtimensat, uintptr(n.LKLFd()), 0, tsp, flags, 0, 0); le != 0 {
				return errno(le, LKL)
			}
			e.Shadows.TimesSet(n)
			return ok(0, LKL)
		}
		lfd, en := vfd(r, fd)
		if en != 0 {
			return errno(en, LKL)
		}
		if _, le := lkl.Syscall6(lkl.SysUtimensat, uintptr(lfd), 0, tsp, flags, 0, 0); le != 0 {
			return errno(le, LKL)
		}
		return ok(0, LKL)
	}
	if flags&unix.AT_EMPTY_PATH != 0 {
		if p, en := readPath(r, pathAddr); en == 0 && p == "" {
			return e.emptyPathOp(r, lkl.SysUtimensat, dirfd, setsTimes, tsp, flags)
		}
	}
	return e.pathOpOn(r, lkl.SysUtimensat, dirfd, pathAddr, setsTimes, tsp, flags)
}

// timevals reads the struct timeval[2] of utimes and futimesat at addr
// (0: now) as timespecs, checking them as the kernel does.
func timevals(r *Request, addr uint64) (*[2]unix.Timespec, unix.Errno) {
	if addr == 0 {
		return nil, 0
	}
	var tv [2]unix.Timeval
	if err := r.G.Read(addr, asBytes(&tv)); err != nil {
		return nil, unix.EFAULT
	}
	var ts [2]unix.Timespec
	for i := range tv {
		if tv[i].Usec < 0 || tv[i].Usec >= 1e6 {
			return nil, unix.EINVAL
		}
		ts[i] = unix.Timespec{Sec: tv[i].Sec, Nsec: tv[i].Usec * 1000}
	}
	return &ts, 0
}

// onShadowFd serves fchmod/fchown on a host fd: a shadow's mode and owner
// are its LKL file's; any other host fd is the host's business (but a
// read-only bind's refuses).
func (e *Engine) onShadowFd(r *Request, nr uintptr) Result {
	fd := int(int32(r.Args[0]))
	if e.roHostFd(r, fd) {
		return errno(unix.EROFS, Host)
	}
	n := e.Shadows.OfGuestFd(r.P.Tgid, fd)
	if n == nil {
		return cont
	}
	if _, le := lkl.Syscall6(nr, uintptr(n.LKLFd()), uintptr(r.Args[1]), uintptr(r.Args[2]), 0, 0, 0); le != 0 {
		return errno(le, LKL)
	}
	return ok(0, LKL)
}

func (e *Engine) twoPaths(r *Request, nr uintptr, d1 int32, a1 uint64, d2 int32, a2 uint64, flags uintptr) Result {
	// Between a system route (/proc, ...) and anything else is another
	// filesystem: EXDEV, as Linux checks before permission.
	if s1, en := e.target(r, d1, a1); en == 0 {
		if s2, en := e.target(r, d2, a2); en == 0 && systemRoute(s1) != systemRoute(s2) && s1.Fd == 0 && s2.Fd == 0 {
			return errno(unix.EXDEV, Emulated)
		}
	}
	t1, res, okk := e.modTarget(r, d1, a1)
	if !okk {
		return res
	}
	t2, res, okk := e.modTarget(r, d2, a2)
	if !okk {
		return res
	}
	if t1.Bind != t2.Bind {
		return errno(unix.EXDEV, Emulated) // between a bind and the image, or two binds
	}
	if nr == lkl.SysRenameat2 {
		if en := e.renameDots(r, t1, t2, a1, a2, flags); en != 0 {
			return errno(en, Emulated)
		}
	}
	if t1.Bind != nil {
		res := bindTwo(t1, t2, nr, flags)
		if nr == lkl.SysRenameat2 && res.Errno == 0 {
			e.renamedDir(t1.Path, t2.Path, flags&unix.RENAME_EXCHANGE != 0)
		}
		return res
	}
	p, q := t1.LKLPath(), t2.LKLPath()
	// A rename over a file, or a link, may take a name from an idle shadow
	// node's file: if that was its last, the node goes, freeing its space.
	var victim *shadowfd.Node
	renames := nr == lkl.SysRenameat2 && flags&unix.RENAME_EXCHANGE == 0
	if renames {
		victim = e.nodeAt(q, true)
	}
	sockGone := e.sockGoes(q, renames)
	if _, le := lklPath2(nr, 1, p, 3, q, [6]uintptr{atFdcwd, 0, atFdcwd, 0, flags}); le != 0 {
		return errno(le, LKL)
	}
	sockGone()
	if victim != nil {
		e.Shadows.Unlinked(victim)
	}
	if nr == lkl.SysRenameat2 {
		e.renamedDir(t1.Path, t2.Path, flags&unix.RENAME_EXCHANGE != 0)
	}
	return ok(0, LKL)
}

// systemRoute reports a target served from the host or by kbox itself
// (a route or /proc), not a bind and not the image.
func systemRoute(t guestpath.Target) bool { return t.Host && t.Bind == nil }

// sysRename serves rename(2).
func sysRename(e *Engine, r *Request) Result {
	return e.twoPaths(r, lkl.SysRenameat2, unix.AT_FDCWD, r.Args[0], unix.AT_FDCWD, r.Args[1], 0)
}

// sysRenameat serves renameat(2).
func sysRenameat(e *Engine, r *Request) Result {
	return e.twoPaths(r, lkl.SysRenameat2, int32(r.Args[0]), r.Args[1], int32(r.Args[2]), r.Args[3], 0)
}

// sysRenameat2 serves renameat2(2).
func sysRenameat2(e *Engine, r *Request) Result {
	return e.twoPaths(r, lkl.SysRenameat2, int32(r.Args[0]), r.Args[1], int32(r.Args[2]), r.Args[3], uintptr(r.Args[4]))
}

// sysLink serves link(2).
func sysLink(e *Engine, r *Request) Result {
	return e.twoPaths(r, lkl.SysLinkat, unix.AT_FDCWD, r.Args[0], unix.AT_FDCWD, r.Args[1], 0)
}

// sysLinkat serves linkat(2).
func sysLinkat(e *Engine, r *Request) Result {
	if res, done := e.linkFd(r, int32(r.Args[0]), r.Args[1], int32(r.Args[2]), r.Args[3], uintptr(r.Args[4])); done {
		return res // an fd's file (sys_file_linkfd.go)
	}
	return e.twoPaths(r, lkl.SysLinkat, int32(r.Args[0]), r.Args[1], int32(r.Args[2]), r.Args[3], uintptr(r.Args[4]))
}

func (e *Engine) symlink(r *Request, target uint64, dirfd int32, link uint64) Result {
	tgt, en := readPath(r, target) // the link's content, stored verbatim
	if en != 0 {
		return errno(en, LKL)
	}
	t, res, okk := e.modTarget(r, dirfd, link)
	if !okk {
		return res
	}
	if t.Bind != nil {
		return bindSymlink(t, tgt)
	}
	p := t.LKLPath()
	if _, le := lklPath2(lkl.SysSymlinkat, 0, tgt, 2, p, [6]uintptr{0, atFdcwd}); le != 0 {
		return errno(le, LKL)
	}
	return ok(0, LKL)
}

// sysSymlink serves symlink(2).
func sysSymlink(e *Engine, r *Request) Result {
	return e.symlink(r, r.Args[0], unix.AT_FDCWD, r.Args[1])
}

// sysSymlinkat serves symlinkat(2).
func sysSymlinkat(e *Engine, r *Request) Result {
	return e.symlink(r, r.Args[0], int32(r.Args[1]), r.Args[2])
}

// sysSync serves sync(2): every shadow written back, then LKL synced.
func sysSync(e *Engine, r *Request) Result {
	// sync(2) reports nothing; a write-back error stays for the next
	// fsync or syncfs.
	e.Shadows.FlushAll()
	lkl.Sync()
	return ok(0, LKL)
}

// sysMount serves mount(2): routed to LKL.
func sysMount(e *Engine, r *Request) Result {
	e.xfacts.mountBegin()
	defer e.xfacts.mountEnd()
	src, en := readPath(r, r.Args[0])
	if en != 0 && r.Args[0] != 0 {
		return errno(en, LKL)
	}
	fstype, en := readPath(r, r.Args[2])
	if en != 0 && r.Args[2] != 0 {
		return errno(en, LKL)
	}
	if t, en := e.target(r, unix.AT_FDCWD, r.Args[1]); en == 0 && t.Proc != nil && t.Proc.Fd != nil && t.Proc.Fd.Symlink {
		return errno(unix.ENOENT, Emulated) // a link itself, through an O_PATH fd's link (procserve.go)
	}
	p, res, okk := e.lklOnly(r, unix.AT_FDCWD, r.Args[1])
	if !okk {
		return res
	}
	src, blk, en := e.mountSource(r, src, uintptr(r.Args[3]))
	if en != 0 {
		return errno(en, Emulated)
	}
	var data string
	if r.Args[4] != 0 {
		if data, en = readString(r.G, r.Args[4], 4096); en != 0 {
			return errno(en, LKL)
		}
	}
	flags := uintptr(r.Args[3])
	var err error
	if flags&unix.MS_REMOUNT != 0 {
		// A read-only remount is EBUSY while files are open for writing
		// there: kbox's own must not count.
		e.releasing(p, func() unix.Errno {
			err = lkl.Mount(src, p, fstype, flags, data)
			en, _ := err.(unix.Errno)
			return en
		})
	} else if blk {
		// A loop device the guest just closed (mke2fs) is released by
		// LKL a clock tick later: busy until then (retryBusy).
		retryBusy(func() unix.Errno {
			err = lkl.Mount(src, p, fstype, flags, data)
			en, _ := err.(unix.Errno)
			return en
		})
	} else {
		err = lkl.Mount(src, p, fstype, flags, data)
	}
	if err != nil {
		return fail(err, LKL)
	}
	if blk && flags&(unix.MS_REMOUNT|unix.MS_BIND|unix.MS_MOVE) == 0 {
		if en := loopMounted(p); en != 0 {
			return errno(en, Emulated)
		}
	}
	return ok(0, LKL)
}

// sysUmount2 serves umount2(2): routed to LKL.
func sysUmount2(e *Engine, r *Request) Result {
	e.xfacts.mountBegin()
	defer e.xfacts.mountEnd()
	p, res, okk := e.lklOnly(r, unix.AT_FDCWD, r.Args[0])
	if !okk {
		return res
	}
	var le unix.Errno
	e.releasing(p, func() unix.Errno {
		_, le = lklPath(lkl.SysUmount2, 0, p, [6]uintptr{0, uintptr(r.Args[1])})
		return le
	})
	if le != 0 {
		return errno(le, LKL)
	}
	return ok(0, LKL)
}

// releaseWait bounds how long an unmount or remount waits for LKL to
// release the files kbox closed for it (a clock tick of LKL's, 10 ms,
// after the close).
const releaseWait = 200 * time.Millisecond

// releasing runs op, an unmount or remount of the filesystem mounted at
// LKL path p, after kbox let go of its own LKL fds there (shadow nodes no
// guest holds: shadowfd.Manager.Release), so that only the guests' open
// files keep it busy, as on Linux. LKL's kernel threads release a closed
// file a clock tick later, so op is retried on EBUSY for a short while
// when kbox closed something.
func (e *Engine) releasing(p string, op func() unix.Errno) {
	var st lkl.Stat64
	closed := false
	if lklStatUncached(p, false, &st) == 0 {
		closed = e.Shadows.Release(st.Dev)
	}
	deadline := time.Now().Add(releaseWait)
	for op() == unix.EBUSY && closed && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func (e *Engine) pathOpNoDir(r *Request, nr uintptr, addr uint64, arg uintptr) Result {
	p, res, okk := e.lklOnly(r, unix.AT_FDCWD, addr)
	if !okk {
		return res
	}
	if _, le := lklPath(nr, 0, p, [6]uintptr{0, arg}); le != 0 {
		return errno(le, LKL)
	}
	return ok(0, LKL)
}

// sysGetcwd serves getcwd(2).
func sysGetcwd(e *Engine, r *Request) Result {
	if r.P.CwdGone() {
		return errno(unix.ENOENT, Emulated) // as Linux's for an unlinked cwd
	}
	cwd := r.P.GuestCwd()
	if uint64(len(cwd)+1) > r.Args[1] {
		return errno(unix.ERANGE, Emulated)
	}
	if err := r.G.Write(r.Args[0], cpath(cwd)); err != nil {
		return errno(unix.EFAULT, Emulated)
	}
	return ok(int64(len(cwd)+1), Emulated)
}

// sysChdir serves chdir(2). Like fchdir it is OwnChange: it changes LKL
// nothing, but a new working directory gives relative paths other
// files, which answers prepared for a path string rely on (hint.go): it
// moves the stat cache's generation then (cwdMoved). git's chdir to
// the top of the repository it already works in does not.
func sysChdir(e *Engine, r *Request) Result {
	defer e.cwdMoved(r, r.P.Cwd())
	t, en := e.target(r, unix.AT_FDCWD, r.Args[0])
	if en == 0 {
		t, en = e.followDev(r, t) // /dev/fd (sys_file_dev.go)
	}
	if en == 0 {
		t, en = e.followRooted(r, t) // a chrooted caller's link (sys_file_chroot.go)
	}
	if en != 0 {
		return errno(en, LKL)
	}
	return e.chdirTo(r, t)
}

// cwdMoved ends a chdir or fchdir that left the caller's working
// directory elsewhere than was.
func (e *Engine) cwdMoved(r *Request, was string) {
	if r.P.Cwd() != was {
		e.changeDone()
	}
}

// sysFchdir serves fchdir(2).
func sysFchdir(e *Engine, r *Request) Result {
	defer e.cwdMoved(r, r.P.Cwd())
	fd := int(int32(r.Args[0]))
	if !r.P.FDs.IsVirtual(fd) || isHostFile(r, int32(fd)) {
		base, en := e.hostDirPath(r, fd)
		if en != 0 {
			return errno(en, Host)
		}
		t, en := e.classify(r, base)
		if en != 0 {
			return errno(en, Host)
		}
		return e.chdirTo(r, t)
	}
	ent, okk := r.P.FDs.Get(fd)
	if !okk {
		return errno(unix.EBADF, LKL)
	}
	t, en := e.classify(r, ent.File.Path) // an image directory, or one of /proc
	if en != 0 {
		return errno(en, LKL)
	}
	return e.chdirTo(r, t)
}

// sysReadlink serves readlink(2).
func sysReadlink(e *Engine, r *Request) Result {
	return e.readlink(r, unix.AT_FDCWD, r.Args[0], r.Args[1], r.Args[2])
}

// sysReadlinkat serves readlinkat(2).
func sysReadlinkat(e *Engine, r *Request) Result {
	if isVirtual(r, r.Args[0]) {
		// An empty path reads the symlink an O_PATH|O_NOFOLLOW fd
		// names, which LKL knows by its own fd (a /proc link's, kbox:
		// procserve.go).
		if p, en := readPath(r, r.Args[1]); en == 0 && p == "" {
			if lp, is := procLinkPath(r, int(int32(r.Args[0]))); is {
				return e.readlinkOut(r, lp, r.Args[2], r.Args[3])
			}
			lfd, en := vfd(r, r.Args[0])
			if en != 0 {
				return errno(en, LKL)
			}
			out := make([]byte, min(r.Args[3], PathMax))
			empty := []byte{0}
			n, le := lkl.Syscall6(lkl.SysReadlinkat, uintptr(lfd), uptr(empty), uptr(out), uintptr(len(out)), 0, 0)
			runtime.KeepAlive(empty)
			runtime.KeepAlive(out)
			if le != 0 {
				return errno(le, LKL)
			}
			e.stats.Changed() // the link's access time (OwnChange)
			if err := r.G.Write(r.Args[2], out[:n]); err != nil {
				return errno(unix.EFAULT, LKL)
			}
			return ok(int64(n), LKL)
		}
	}
	return e.readlink(r, int32(r.Args[0]), r.Args[1], r.Args[2], r.Args[3])
}

// A loop device as mount(2)'s source: package loopdev decides which
// sources may be devices and which devices a guest may mount.

// mountSource returns the source of a guest's mount(2) as LKL must see
// it: a guest path naming a block device becomes the device's LKL path,
// refused (ENXIO) unless it is a loop device; anything else (a
// filesystem's name, "none", a path LKL does not have, the source of a
// bind, move or remount: loopdev.MaySourceDevice) goes as it is. blk says
// the source is a block device: the caller checks what was mounted
// (loopMounted).
func (e *Engine) mountSource(r *Request, src string, flags uintptr) (lsrc string, blk bool, en unix.Errno) {
	if !loopdev.MaySourceDevice(src, flags) {
		return src, false, 0
	}
	t, en := e.resolveAt(r, unix.AT_FDCWD, src)
	if en != 0 || t.Host || t.Proc != nil || t.Fd > 0 {
		return src, false, 0
	}
	var st lkl.Stat64
	if lklStatUncached(t.LKLPath(), false, &st) != 0 || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return src, false, 0
	}
	if !lklDevice(st.Mode, st.Rdev) {
		return "", true, unix.ENXIO
	}
	return t.LKLPath(), true, 0
}

// loopMounted checks that a new mount at LKL path p of a block device
// source is a loop device's filesystem: the guest may have put another
// device's node at the source's path since mountSource looked. If not, it
// is detached at once and the mount fails with ENXIO.
func loopMounted(p string) unix.Errno {
	var st lkl.Stat64
	if lklStatUncached(p, false, &st) == 0 && unix.Major(st.Dev) == loopdev.Major {
		return 0
	}
	lklPath(lkl.SysUmount2, 0, p, [6]uintptr{0, unix.MNT_DETACH})
	return unix.ENXIO
}
