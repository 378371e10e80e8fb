package dispatch

import (
	"runtime"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The engine's side of the guest's /proc (docs/guest-view.md, docs/tiers.md
// "The guest's /proc"). Package procfs says what each path under /proc is
// for the calling process (procfs.Classify); the handlers here serve what
// it says: a path beneath the host's /proc is a host route's target, a
// node (Target.Proc) is opened, stat'ed, followed, read as a link here,
// and a path a link leads to is classified again as any guest path. Only
// paths under /proc pay for any of this.

// procTarget is the Target of a node: Host with no route, so that a
// handler that does not know nodes fails (ENOENT, or EACCES for a change)
// rather than reach anything.
func procTarget(abs string, n *procfs.Node) guestpath.Target {
	return guestpath.Target{Host: true, Path: abs, Proc: n}
}

// procHost is the Target of abs served from the host's /proc at rel.
func procHost(abs, rel string) guestpath.Target {
	return guestpath.Target{Host: true, Path: abs, Route: "/proc", Rel: rel}
}

// classifyProc resolves abs, a clean guest path at or below /proc, for
// the calling process; depth counts the links followed so far.
func (e *Engine) classifyProc(r *Request, abs string, depth int) (guestpath.Target, unix.Errno) {
	f, en := procfs.Classify((*procSys)(e), e.procCaller(r), abs, depth)
	switch {
	case en != 0:
		return guestpath.Target{}, en
	case f.Redirect:
		return e.classifyN(r, guestpath.Clean(f.Path, f.Sub), f.Depth)
	case f.Node != nil:
		return procTarget(f.Path, f.Node), 0
	}
	return procHost(f.Path, f.Rel), 0
}

// followProc follows t while it is a link node, as the kernel follows a
// path's last component; what is not a link comes back as it is.
func (e *Engine) followProc(r *Request, t guestpath.Target) (guestpath.Target, unix.Errno) {
	tail := t.Tail
	t.Tail = ""
	for i := 0; t.Proc != nil && t.Proc.Kind == procfs.Link; i++ {
		if i >= procfs.MaxDepth {
			return guestpath.Target{}, unix.ELOOP
		}
		n := t.Proc
		var en unix.Errno
		switch {
		case n.Fd != nil:
			t, en = e.followFd(r, n.Fd)
		default:
			t, en = e.classifyN(r, n.To, 1)
		}
		if en != 0 {
			return guestpath.Target{}, en
		}
	}
	if tail != "" {
		if en := e.checkDirTail(r, &t, tail); en != 0 {
			return guestpath.Target{}, en
		}
	}
	return t, 0
}

// checkDirTail applies a trailing slash of the guest's path to t, a
// target reached through /proc: it must be a directory.
func (e *Engine) checkDirTail(r *Request, t *guestpath.Target, tail string) unix.Errno {
	switch {
	case t.Proc != nil:
		var st unix.Stat_t
		t.Tail = ""
		if en := e.procStat(r, *t, false, &st); en != 0 {
			return en
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return unix.ENOTDIR
		}
	case t.Host:
		if t.Rel != "." && !strings.HasSuffix(t.Rel, "/") {
			t.Rel += tail
		}
	case t.Path != "/":
		t.Tail = tail
	}
	return 0
}

// procTail resolves a node reached with a trailing slash: links are
// followed, and the result must be a directory.
func (e *Engine) procTail(r *Request, t guestpath.Target) (guestpath.Target, unix.Errno) {
	if t.Proc == nil || t.Tail == "" {
		return t, 0
	}
	return e.followProc(r, t)
}

// kprocPath calls LKL syscall nr with path rel beneath LKL's proc (at
// argument pos, its dirfd at pos-1); the other arguments are as given.
func (e *Engine) kprocPath(nr uintptr, pos int, rel string, a [6]uintptr) (uintptr, unix.Errno) {
	if !e.Opt.HasKernelProc {
		return 0, unix.ENOENT
	}
	a[pos-1] = uintptr(e.Opt.KernelProc)
	return lklPath(nr, pos, rel, a)
}

// procOpen serves an open of a node.
func (e *Engine) procOpen(r *Request, t guestpath.Target, flags int, mode uint32) Result {
	var en unix.Errno
	if t.Proc.Kind == procfs.Link {
		if flags&unix.O_NOFOLLOW != 0 {
			if flags&unix.O_PATH != 0 {
				return e.openProcLink(r, t, flags) // proclink.go
			}
			return errno(unix.ELOOP, Emulated)
		}
		if t, en = e.followProc(r, t); en != 0 {
			return errno(en, Emulated)
		}
		return e.openTarget(r, t, flags, mode)
	}
	if t, en = e.procTail(r, t); en != 0 {
		return errno(en, Emulated)
	}
	n := t.Proc
	cloexec := flags&unix.O_CLOEXEC != 0
	writes := flags&unix.O_ACCMODE != unix.O_RDONLY || flags&unix.O_TRUNC != 0
	if flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL {
		return errno(unix.EEXIST, Emulated)
	}
	switch n.Kind {
	case procfs.LKL:
		if writes && (!n.Write || !e.guestAdmin(r)) {
			return errno(unix.EACCES, Denied) // LKL's sysctls are not the guest's to change
		}
		lflags := int(lkl.OpenFlagsToLKL(uint32(flags&^(unix.O_CLOEXEC|unix.O_CREAT)))) | unix.O_CLOEXEC
		fd, le := e.kprocPath(lkl.SysOpenat, 1, n.LKL+t.Tail, [6]uintptr{0, 0, uintptr(lflags)})
		if le != 0 {
			return errno(le, LKL)
		}
		gfd, err := r.P.FDs.Open(int(fd), t.Path, flags, cloexec)
		if err != nil {
			return fail(err, LKL)
		}
		return ok(int64(gfd), LKL)
	case procfs.Dir:
		if writes || flags&unix.O_CREAT != 0 {
			return errno(unix.EISDIR, Emulated)
		}
		gfd, err := r.P.FDs.OpenListing(fdtable.NewListing(n.List), t.Path, flags, cloexec)
		if err != nil {
			return fail(err, Emulated)
		}
		return ok(int64(gfd), Emulated)
	case procfs.Text:
		switch {
		case flags&unix.O_DIRECTORY != 0:
			return errno(unix.ENOTDIR, Emulated)
		case writes && n.Store != nil:
			return e.openVar(r, t.Path, n, flags) // procvar.go
		case writes:
			return errno(unix.EACCES, Emulated)
		}
		return e.openText(r, t.Path, n.Text(), flags)
	case procfs.Obj:
		return e.reopenFd(r, n.Fd, flags, mode)
	}
	return errno(unix.ENOENT, Emulated)
}

// openText gives the guest a read-only file holding b: a sealed memfd
// (named after guest path p, so that its fd link reads back as p) opened
// again read-only, so that the guest's reads are native.
func (e *Engine) openText(r *Request, p string, b []byte, flags int) Result {
	name := "kbox:" + p
	if len(name) > 240 {
		name = name[:240]
	}
	mfd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fail(err, Emulated)
	}
	defer unix.Close(mfd)
	for off := 0; off < len(b); {
		n, err := unix.Pwrite(mfd, b[off:], int64(off))
		if err != nil {
			return fail(err, Emulated)
		}
		off += n
	}
	unix.FcntlInt(uintptr(mfd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE)
	rflags := unix.O_RDONLY | unix.O_CLOEXEC | flags&(unix.O_NONBLOCK|unix.O_PATH)
	hfd, err := unix.Open(guestpath.ProcFd(mfd), rflags, 0)
	if err != nil {
		return fail(err, Emulated)
	}
	if flags&unix.O_PATH != 0 {
		return hostPathFd(r, hfd, flags&unix.O_CLOEXEC != 0)
	}
	defer unix.Close(hfd)
	gfd, err := r.G.AddFDReply(hfd, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Emulated)
	}
	return answered(int64(gfd), Emulated)
}

// hostProcStat is fstatat on the host's /proc (the route's root).
func hostProcStat(rel string, nofollow bool, st *unix.Stat_t) error {
	root, err := guestpath.RouteRoot("/proc")
	if err != nil {
		return err
	}
	flags := 0
	if nofollow {
		flags = unix.AT_SYMLINK_NOFOLLOW
	}
	return unix.Fstatat(root, rel, st, flags)
}

// procStat stats a node (follows a link unless nofollow).
func (e *Engine) procStat(r *Request, t guestpath.Target, nofollow bool, st *unix.Stat_t) unix.Errno {
	var en unix.Errno
	if !nofollow || t.Tail != "" {
		if t, en = e.followProc(r, t); en != 0 {
			return en
		}
		if t.Proc == nil {
			return e.statTarget(r, t, false, st)
		}
	}
	n := t.Proc
	switch n.Kind {
	case procfs.LKL:
		flags := uintptr(0)
		if nofollow {
			flags = unix.AT_SYMLINK_NOFOLLOW
		}
		var lst lkl.Stat64
		_, le := e.kprocPath(lkl.SysNewfstatat, 1, n.LKL, [6]uintptr{0, 0, lkl.PtrOf(&lst), flags})
		runtime.KeepAlive(&lst)
		if le != 0 {
			return le
		}
		lst.ToHost(st)
		return 0
	case procfs.Obj:
		return e.statFd(r, n.Fd, st)
	}
	if n.Stat != nil {
		return n.Stat(st)
	}
	if err := hostProcStat(n.Like, n.Kind == procfs.Link, st); err != nil {
		// A link of a virtual fd has no host counterpart: the
		// process's exe link stands for it.
		if n.Kind != procfs.Link || hostProcStat(strings.TrimSuffix(procBase(n.Like), "/")+"/exe", true, st) != nil {
			return unix.ENOENT
		}
	}
	switch n.Kind {
	case procfs.Text:
		st.Mode = unix.S_IFREG | 0o444
		if n.Store != nil {
			st.Mode |= 0o200
		}
		st.Size, st.Blocks = 0, 0
	case procfs.Dir:
		if t.Path == "/proc" {
			st.Nlink = 2 // and a link per process directory, not the host's count
			for range procfs.GuestTgids((*procSys)(e)) {
				st.Nlink++
			}
		}
	case procfs.Link:
		if n.Mode != 0 {
			st.Mode = unix.S_IFLNK | n.Mode
		}
	}
	return 0
}

// procBase returns the process part ("PID/" or "PID/task/TID/") of a
// path beneath the host's /proc.
func procBase(rel string) string {
	pid, rest, _ := strings.Cut(rel, "/")
	if t, rest2, ok := strings.Cut(rest, "/"); ok && t == "task" {
		tid, _, _ := strings.Cut(rest2, "/")
		return pid + "/task/" + tid + "/"
	}
	return pid + "/"
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

// procReadlink answers readlink of a node: a link's text; EINVAL for
// anything else, as for a file that is no link.
func (e *Engine) procReadlink(r *Request, t guestpath.Target) (string, unix.Errno) {
	if t.Tail != "" {
		return "", unix.EINVAL
	}
	if t.Proc.Kind != procfs.Link {
		return "", unix.EINVAL
	}
	return t.Proc.Link, 0
}

// procAccess serves access(2) of a node (links followed).
func (e *Engine) procAccess(r *Request, t guestpath.Target, mode int) unix.Errno {
	t, en := e.followProc(r, t)
	if en != 0 {
		return en
	}
	if t.Proc == nil {
		return e.accessTarget(r, t, mode, 0)
	}
	n := t.Proc
	switch n.Kind {
	case procfs.LKL:
		_, le := e.kprocPath(lkl.SysFaccessat2, 1, n.LKL, [6]uintptr{0, 0, uintptr(mode), unix.AT_EACCESS})
		if le == 0 && mode&unix.W_OK != 0 && (!n.Write || !e.guestAdmin(r)) {
			return unix.EACCES
		}
		return le
	case procfs.Obj:
		if n.Fd.LKLFd >= 0 {
			_, le := e.kprocPath(lkl.SysFaccessat2, 1, "self/fd/"+strconv.Itoa(n.Fd.LKLFd), [6]uintptr{0, 0, uintptr(mode), unix.AT_EACCESS})
			return le
		}
		if n.Fd.Host == "" {
			return 0
		}
		return sysabi.Errno(unix.Access(n.Fd.Host, uint32(mode)))
	case procfs.Dir:
		if mode&unix.W_OK != 0 {
			return unix.EACCES
		}
		return 0
	case procfs.Text:
		if n.Store != nil && n.Owner != nil && mode&unix.X_OK == 0 {
			o, c := n.Owner.IDs(), r.P.creds()
			if mode&unix.W_OK != 0 && !c.mayWrite(o.EUID, o.EGID, 0o644) {
				return unix.EACCES
			}
			return 0
		}
	}
	if mode&(unix.W_OK|unix.X_OK) != 0 {
		return unix.EACCES
	}
	return 0
}

// procChdir serves chdir to a node (links followed).
func (e *Engine) procChdir(r *Request, t guestpath.Target) Result {
	t, en := e.followProc(r, t)
	if en != 0 {
		return errno(en, Emulated)
	}
	if t.Proc == nil {
		return e.chdirTo(r, t)
	}
	var st unix.Stat_t
	if en := e.procStat(r, t, false, &st); en != 0 {
		return errno(en, Emulated)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errno(unix.ENOTDIR, Emulated)
	}
	p := t.Path
	if t.Proc.Kind == procfs.Obj {
		if p = t.Proc.Fd.Path; p == "" {
			return errno(unix.EACCES, Denied)
		}
		nt, en := e.classifyN(r, p, 1)
		if en != 0 {
			return errno(en, Emulated)
		}
		return e.chdirTo(r, nt)
	}
	r.P.SetCwd(p)
	return ok(0, Emulated)
}

// procStatfs serves statfs of a node (links followed): /proc's, or the
// filesystem of what a link leads to.
func (e *Engine) procStatfs(r *Request, t guestpath.Target, sf *unix.Statfs_t) (guestpath.Target, unix.Errno) {
	t, en := e.followProc(r, t)
	if en != 0 || t.Proc == nil {
		return t, en
	}
	if t.Proc.Kind == procfs.Obj {
		ref := t.Proc.Fd
		if ref.LKLFd >= 0 {
			_, le := lkl.Syscall6(lkl.SysFstatfs, uintptr(ref.LKLFd), lkl.PtrOf(sf), 0, 0, 0, 0)
			return t, le
		}
		if ref.Host != "" {
			return t, sysabi.Errno(unix.Statfs(ref.Host, sf))
		}
	}
	return t, sysabi.Errno(unix.Statfs("/proc", sf))
}

// procExec resolves a node for execve: only a link that leads to a
// program of the image or of a bind can be run.
func (e *Engine) procExec(r *Request, t guestpath.Target) (guestpath.Target, unix.Errno) {
	t, en := e.followProc(r, t)
	if en != 0 {
		return t, en
	}
	if t.Proc != nil && t.Proc.Kind == procfs.Obj && t.Proc.Fd.Path != "" {
		t, en = e.classifyN(r, t.Proc.Fd.Path, 1)
	}
	if en == 0 && t.Proc != nil {
		en = unix.EACCES
	}
	return t, en
}
