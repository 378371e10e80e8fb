package dispatch

import (
	"os"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/gdbmirror"
	"github.com/kbox-project/kbox/guestpath"
	"golang.org/x/sys/unix"
)

// Paths are resolved with package guestpath: resolveAt and classifyN put
// its pieces together for a request, with the caller's fds, kbox's /proc,
// resolv.conf and hosts, and the policy, which are the engine's.

// route returns the host route holding p, if any.
func (e *Engine) route(p string) (string, bool) { return guestpath.RouteOf(e.Opt.HostRoutes, p) }

// target reads the path argument at addr and resolves it against dirfd.
func (e *Engine) target(r *Request, dirfd int32, addr uint64) (guestpath.Target, unix.Errno) {
	p, en := readPath(r, addr)
	if en != 0 {
		return guestpath.Target{}, en
	}
	return e.resolveAt(r, dirfd, p)
}

// The resolution's steps write their Target (about 100 bytes) through a
// pointer (the Into forms), so that a stat's path is not copied at each
// step; the value forms serve the other callers.

// resolveAt resolves path (already read from the guest) against dirfd.
func (e *Engine) resolveAt(r *Request, dirfd int32, p string) (guestpath.Target, unix.Errno) {
	var t guestpath.Target
	en := e.resolveInto(r, dirfd, p, &t)
	return t, en
}

// resolveMemo is a serving thread's last resolution of a path to the
// image, kept in its Request: ls -l asks statx, lgetxattr and getxattr
// of one path in turn. Such a result depends only on the path, and for a
// relative one the cwd: binds, routes and kbox's own files are fixed for
// the engine's life. Not kept under a chroot, a policy's path rules or
// the debug mirror, nor for anything but a plain image path, nor for a
// call's second run with its links walked (redoWalked).
type resolveMemo struct {
	p, cwd string // the guest's path; the cwd it was resolved in, if relative
	t      guestpath.Target
}

// resolveInto is resolveAt into *t, which the caller gives zero.
func (e *Engine) resolveInto(r *Request, dirfd int32, p string, t *guestpath.Target) unix.Errno {
	if p == "" {
		return unix.ENOENT
	}
	if p[0] != '/' && dirfd == unix.AT_FDCWD && r.P.CwdGone() {
		if !fromGoneDir(p) {
			return unix.ENOENT
		}
		return e.resolveFresh(r, dirfd, p, t)
	}
	if (p[0] == '/' || dirfd == unix.AT_FDCWD) && r.P.chroot() == "" && !(e.Opt.Policy != nil && e.Opt.Policy.paths) && !gdbmirror.On() && !r.walkLinks {
		var cwd string
		if p[0] != '/' {
			cwd = r.P.Cwd()
		}
		if m := &r.memo; m.p == p && m.cwd == cwd {
			*t = m.t
			return 0
		}
		en := e.resolveFresh(r, dirfd, p, t)
		if en == 0 && t.Plain() && !guestpath.UnderPts(t.Path) && guestpath.LastDotDot(p) < 0 {
			r.memo = resolveMemo{p: p, cwd: cwd, t: *t}
		}
		return en
	}
	return e.resolveFresh(r, dirfd, p, t)
}

// fromGoneDir reports whether relative path p can be found from a removed
// working directory (Proc.CwdGone): Linux finds no name in a dead
// directory but ".." (its parent, where kbox's path of it still leads).
// The directory itself ("." alone) is not kept, so kbox gives ENOENT for
// it too, where Linux would open or stat the dead directory.
func fromGoneDir(p string) bool {
	for p != "" {
		c, rest, _ := strings.Cut(p, "/")
		switch c {
		case "", ".":
			p = rest
		case "..":
			return true
		default:
			return false
		}
	}
	return false
}

// resolveFresh is resolveInto without the memo.
func (e *Engine) resolveFresh(r *Request, dirfd int32, p string, t *guestpath.Target) unix.Errno {
	if root := r.P.chroot(); root != "" {
		if abs, en, handled := e.resolveRooted(r, root, dirfd, p); handled {
			if en != 0 {
				return en
			}
			return e.resolvedInto(r, p, abs, t)
		}
	}
	var abs string
	var en unix.Errno
	switch {
	case strings.HasPrefix(p, "/"):
		abs, en = e.joinPath(r, "/", p)
	case dirfd == unix.AT_FDCWD:
		abs, en = e.joinPath(r, r.P.Cwd(), p)
	case r.P.FDs.IsVirtual(int(dirfd)) && !isHostFile(r, dirfd):
		ent, ok := r.P.FDs.Get(int(dirfd))
		if !ok {
			return unix.EBADF
		}
		abs, en = e.joinPath(r, ent.File.Path, p)
	default:
		// A host directory fd (or a host file kept in the virtual
		// table): only one opened on a host route or in a bind is
		// usable, and the result must stay on that route. Any other
		// host fd (a shadow of an image file, a pipe) is not a
		// directory: ENOTDIR, as on Linux.
		base, en := e.hostDirPath(r, int(dirfd))
		if en != 0 {
			return en
		}
		if abs, en = e.joinPath(r, base, p); en == 0 {
			if _, ok := e.route(abs); !ok && e.bindOf(base) == nil && !e.pts.Holds(base) {
				return unix.EACCES
			}
		}
	}
	if en != 0 {
		return en
	}
	if r.walkLinks {
		// Every link of abs followed by kbox, across the image and the
		// binds; the final one as the call would.
		follow := p == r.Path && followsLink(r) || guestpath.DirTail(p) != ""
		if abs, en = e.walkIn(r, "/", "/", abs, follow); en != 0 {
			return en
		}
	}
	return e.resolvedInto(r, p, abs, t)
}

// redoWalked runs again a call that resolved a path in a bind and failed
// with EXDEV: a bind is resolved on the host beneath its directory, and a
// link there that leads out of it (an absolute target, or ".." above the
// bind) stops that resolution with EXDEV (guestpath.Bind.OpenIn). On
// Linux such a link goes on from the guest's root or the bind's parent in
// the guest's tree; so does the second run, whose paths kbox walks
// component by component (walkIn), links read where each one is, in the
// image or a bind, before the call resolves what they led to. A call
// whose EXDEV is its own (a rename between two binds) gets it again.
func (e *Engine) redoWalked(r *Request, sc *Syscall) Result {
	r.walkLinks = true
	r.memo = resolveMemo{}
	res := sc.Fn(e, r)
	r.walkLinks = false
	return res
}

// FollowPath resolves guest path p, its final link included, in the
// guest's tree of binds and host routes, the image read through LKL, as
// redoWalked's second run does: for a path found before an engine serves
// the guest (kbox's search for the first program, whose bind may hold a
// link out of it).
func FollowPath(binds []*guestpath.Bind, routes []string, p string) (string, unix.Errno) {
	e := &Engine{Opt: Options{Binds: binds, HostRoutes: routes}}
	return e.walkIn(nil, "/", "/", guestpath.Clean("/", p), true)
}

// joinPath makes guest path p absolute against base (a clean absolute
// path: the cwd or a directory fd's) and clean. Its ".." components are
// taken as Linux takes them, from the directory the path has reached,
// symlinks followed ("link/.." is the parent of the link's target, and
// "file/.." ENOTDIR): the part of p up to its last ".." is walked
// (walkIn, sys_file_chroot.go), the rest joined to it lexically, to be
// resolved as any clean path. A path without ".." is only cleaned.
func (e *Engine) joinPath(r *Request, base, p string) (string, unix.Errno) {
	if guestpath.IsClean(p) {
		return p, 0 // the common case
	}
	end := guestpath.LastDotDot(p)
	if end < 0 {
		return guestpath.Clean(base, p), 0
	}
	head := p[:end]
	if head[0] != '/' {
		head = base + "/" + head
	}
	done, en := e.walkIn(r, "/", "/", head, false)
	if en != 0 {
		return "", en
	}
	return guestpath.Clean(done, strings.TrimLeft(p[end:], "/")), 0
}

// resolved classifies abs, the clean absolute path guest path p led to,
// with p's trailing slash kept.
func (e *Engine) resolved(r *Request, p, abs string) (guestpath.Target, unix.Errno) {
	var t guestpath.Target
	en := e.resolvedInto(r, p, abs, &t)
	return t, en
}

// resolvedInto is resolved into *t.
func (e *Engine) resolvedInto(r *Request, p, abs string, t *guestpath.Target) unix.Errno {
	en := e.classifyInto(r, abs, 0, t)
	if tail := guestpath.DirTail(p); en == 0 && tail != "" {
		if t.Fd > 0 || t.FdDir {
			en = e.devLinkDir(r, t, tail) // sys_file_dev.go
		} else {
			t.KeepTail(tail)
		}
	}
	if gdbmirror.On() {
		e.gdbResolved(r, p, *t, en) // the debug mirror (gdb.go)
	}
	return en
}

// classify resolves abs, a clean absolute guest path: a bind, a host
// route (/proc is kbox's own: procfs, dispatch/procserve.go) or the image.
func (e *Engine) classify(r *Request, abs string) (guestpath.Target, unix.Errno) {
	return e.classifyN(r, abs, 0)
}

// classifyN is classify after depth links followed under /proc, with the
// policy's path rules applied to the result (policy.go).
func (e *Engine) classifyN(r *Request, abs string, depth int) (guestpath.Target, unix.Errno) {
	var t guestpath.Target
	en := e.classifyInto(r, abs, depth, &t)
	return t, en
}

// classifyInto is classifyN into *t.
func (e *Engine) classifyInto(r *Request, abs string, depth int, t *guestpath.Target) unix.Errno {
	en := e.classifyRaw(r, abs, depth, t)
	if en == 0 && e.Opt.Policy != nil && e.Opt.Policy.paths {
		en = e.policyPath(r, t)
	}
	return en
}

// classifyRaw is classifyInto without the policy.
func (e *Engine) classifyRaw(r *Request, abs string, depth int, t *guestpath.Target) (en unix.Errno) {
	if b := e.bindOf(abs); b != nil {
		*t = b.Target(abs)
		if r != nil {
			r.inBind = true
		}
		return 0
	}
	if nt, ok := e.netFileTarget(abs); ok {
		*t = nt // kbox's resolv.conf and hosts with --net (sys_file_etc.go)
		return 0
	}
	if nt, ok := e.devTarget(abs); ok {
		*t = nt // kbox's devpts instance (sys_file_dev.go)
		return 0
	}
	if fd, rest, ok := e.devFd(abs); ok {
		*t, en = e.beneathFd(r, abs, fd, rest) // /dev/fd/N (sys_file_dev.go)
		return en
	}
	rt, ok := e.route(abs)
	if !ok {
		*t = guestpath.Target{Path: abs}
		return 0
	}
	if rt == "/proc" {
		*t, en = e.classifyProc(r, abs, depth)
		return en
	}
	*t = guestpath.RouteTarget(rt, abs)
	return 0
}

// isHostFile reports a guest virtual fd that is a host file (hostfd.go).
func isHostFile(r *Request, fd int32) bool {
	_, isHost := hostFile(r, uint64(uint32(fd)))
	return isHost
}

// hostDirPath returns the guest path of a guest host fd used as a
// directory (a dirfd, fchdir): EBADF if it is not open, ENOTDIR if it is
// not a directory, then as hostFdPath.
func (e *Engine) hostDirPath(r *Request, fd int) (string, unix.Errno) {
	var st unix.Stat_t
	var err error
	if hfd, isHost := hostFile(r, uint64(uint32(fd))); isHost {
		err = unix.Fstat(hfd, &st)
	} else if fd < 0 {
		err = unix.EBADF
	} else {
		err = unix.Stat("/proc/"+strconv.Itoa(r.P.Tgid)+"/fd/"+strconv.Itoa(fd), &st)
	}
	if err != nil {
		return "", unix.EBADF
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", unix.ENOTDIR
	}
	return e.hostFdPath(r, fd)
}

// hostFdPath returns the guest path of a guest host fd that was opened on a
// host route or in a bind (or of a host file kept in the virtual table).
func (e *Engine) hostFdPath(r *Request, fd int) (string, unix.Errno) {
	if hfd, isHost := hostFile(r, uint64(uint32(fd))); isHost {
		return e.hostLinkPath(guestpath.ProcFd(hfd))
	}
	return e.hostLinkPath("/proc/" + strconv.Itoa(r.P.Tgid) + "/fd/" + strconv.Itoa(fd))
}

// hostLinkPath maps the /proc fd link of a host fd to the guest path of
// its file, which must be on a host route or in a bind.
func (e *Engine) hostLinkPath(link string) (string, unix.Errno) {
	l, err := os.Readlink(link)
	if err != nil {
		return "", unix.EBADF
	}
	if g, ok := guestpath.GuestPath(e.Opt.Binds, l); ok {
		return g, 0
	}
	if g, ok := e.pts.GuestPath(link, l); ok {
		return g, 0
	}
	if _, ok := e.route(l); !ok {
		return "", unix.EACCES
	}
	return l, 0
}

// openHostAs is guestpath.OpenHost for a guest's open: an O_PATH open takes the flags
// open(2) takes with it, and a create runs under the guest's umask
// (proc.go).
func (e *Engine) openHostAs(r *Request, t guestpath.Target, flags int, mode uint32) (fd int, err error) {
	if flags&unix.O_PATH != 0 {
		// open(2) ignores the other flags (libcs add O_LARGEFILE);
		// openat2, which serves it, would refuse them with EINVAL.
		flags &= unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		return guestpath.OpenHost(t, flags, mode)
	}
	withUmask(r.P.umask.Load(), func() { fd, err = guestpath.OpenHost(t, flags, mode) })
	return fd, err
}

// Binds (-b) are package guestpath's: here are the engine's views of
// them and the results its handlers give.

// bindOf returns the bind holding guest path p.
func (e *Engine) bindOf(p string) *guestpath.Bind { return guestpath.BindOf(e.Opt.Binds, p) }

// bindGuestPath maps a host path (of a guest fd) inside a bind back to its
// guest path.
func (e *Engine) bindGuestPath(host string) (string, bool) {
	return guestpath.GuestPath(e.Opt.Binds, host)
}

// bindOp runs a one-path modification (an LKL syscall number of pathOp,
// with its extra arguments) on a bind target.
func bindOp(t guestpath.Target, nr uintptr, rest []uintptr) Result {
	denied, err := t.Bind.Op(t.Rel, nr, rest)
	if denied {
		return fail(err, Denied)
	}
	return hostDone(err)
}

// bindTwo runs rename or link between two targets of the same bind.
func bindTwo(t1, t2 guestpath.Target, nr uintptr, flags uintptr) Result {
	return hostDone(t1.Bind.Two(t1.Rel, t2.Rel, nr, flags))
}

// bindSymlink makes a symlink at t holding tgt verbatim: a guest path,
// followed in the guest's tree (redoWalked).
func bindSymlink(t guestpath.Target, tgt string) Result {
	return hostDone(t.Bind.Symlink(t.Rel, tgt))
}

// hostDone is the result of a change the host made: 0 or its error.
func hostDone(err error) Result {
	if err != nil {
		return fail(err, Host)
	}
	return ok(0, Host)
}

// roHostFd reports a guest host fd opened in a read-only bind: fd-based
// changes through it (fchmod, fchown, futimens) are refused with EROFS.
func (e *Engine) roHostFd(r *Request, fd int) bool {
	if !e.anyRO {
		return false
	}
	l, err := os.Readlink("/proc/" + strconv.Itoa(r.P.Tgid) + "/fd/" + strconv.Itoa(fd))
	if err != nil {
		return false
	}
	g, ok := e.bindGuestPath(l)
	if !ok {
		return false
	}
	return e.bindOf(g).ReadOnly
}
