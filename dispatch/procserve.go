package dispatch

import (
	"os"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// The engine's hands for the guest's /proc (docs/tiers.md "The guest's
// /proc"): package procfs says what each path under /proc is for the
// calling process, how to serve an open, stat or access of it and what an
// fd is; the engine acts on what it says here: it resolves a path a link
// leads to again, installs fds, reopens an LKL file with the caller's
// credentials. Only paths under /proc pay for the serving; fdRefOf also
// describes an fd for /dev/fd/N, the path policy and the f*xattr calls.
// Below it, procSys: the engine as procfs.System.

// procTarget is the Target of a node: Host with no route, so that a
// handler that does not know nodes fails (ENOENT, or EACCES for a change)
// rather than reach anything.
func procTarget(abs string, n *procfs.Node) guestpath.Target {
	return guestpath.Target{Host: true, Path: abs, Proc: n}
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
	return guestpath.Target{Host: true, Path: f.Path, Route: "/proc", Rel: f.Rel}, 0
}

// followProc follows t while it is a link node, as the kernel follows a
// path's last component; what is not a link comes back as it is. A
// trailing slash of the guest's path (t.Tail) then asks for a directory.
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
		case n.To == "":
			en = unix.ENOENT // a link to nothing kbox keeps (a removed cwd)
		default:
			t, en = e.classifyN(r, n.To, 1)
		}
		if en != 0 {
			return guestpath.Target{}, en
		}
	}
	switch {
	case tail == "":
	case t.Proc != nil:
		var st unix.Stat_t
		t.Tail = ""
		if en := e.procStat(r, t, false, &st); en != 0 {
			return guestpath.Target{}, en
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return guestpath.Target{}, unix.ENOTDIR
		}
	case t.Host:
		if t.Rel != "." && !strings.HasSuffix(t.Rel, "/") {
			t.Rel += tail
		}
	case t.Path != "/":
		t.Tail = tail
	}
	return t, 0
}

// procDir is the directory d (a clean path under /proc a walk reached
// before "..") names for the caller, its links followed (self, cwd, an
// fd's, ...): "/proc/PID/fd" for /proc/self/fd, the cwd's path for
// /proc/self/cwd. ENOTDIR when it is no directory.
func (e *Engine) procDir(r *Request, d string) (string, unix.Errno) {
	t, en := e.classifyProc(r, d, 0)
	if en == 0 {
		t, en = e.followProc(r, t)
	}
	if en != 0 {
		return "", en
	}
	var st unix.Stat_t
	if en := e.statTarget(r, t, false, &st); en != 0 {
		return "", en
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", unix.ENOTDIR
	}
	return t.Path, 0
}

// procConfig is the engine's fixed facts procfs needs.
func (e *Engine) procConfig() procfs.Config { return (*procSys)(e).Config() }

// procOpen serves an open of a node as procfs.PlanOpen decides.
func (e *Engine) procOpen(r *Request, t guestpath.Target, flags int, mode uint32) Result {
	var en unix.Errno
	if t.Proc.Kind == procfs.Link {
		switch {
		case flags&unix.O_NOFOLLOW != 0 && flags&unix.O_PATH != 0:
			return e.openProcLink(r, t, flags)
		case flags&unix.O_NOFOLLOW != 0:
			return errno(unix.ELOOP, Emulated)
		}
		if t, en = e.followProc(r, t); en != 0 {
			return errno(en, Emulated)
		}
		return e.openTarget(r, t, flags, mode)
	}
	if t.Tail != "" {
		if t, en = e.followProc(r, t); en != 0 {
			return errno(en, Emulated)
		}
	}
	n, cloexec := t.Proc, flags&unix.O_CLOEXEC != 0
	op, en, denied := procfs.PlanOpen(n, flags, func() bool { return e.guestAdmin(r) })
	switch {
	case en != 0 && denied:
		return errno(en, Denied)
	case en != 0:
		return errno(en, Emulated)
	case op == procfs.OpLKL:
		fd, le := procfs.OpenLKL(e.procConfig(), n, t.Tail, flags)
		if le != 0 {
			return errno(le, LKL)
		}
		gfd, err := r.P.FDs.Open(fd, t.Path, flags, cloexec)
		if err != nil {
			return fail(err, LKL)
		}
		return ok(int64(gfd), LKL)
	case op == procfs.OpList:
		gfd, err := r.P.FDs.OpenListing(fdtable.NewListing(n.List), t.Path, flags, cloexec)
		if err != nil {
			return fail(err, Emulated)
		}
		return ok(int64(gfd), Emulated)
	case op == procfs.OpVar:
		return e.openVar(r, t.Path, n, flags)
	case op == procfs.OpReopen:
		return e.reopenFd(r, n.Fd, flags, mode)
	}
	return e.openText(r, t.Path, n.Text(), flags)
}

// openText gives the guest a read-only file holding b (procfs.TextFd),
// for guest path p.
func (e *Engine) openText(r *Request, p string, b []byte, flags int) Result {
	hfd, err := procfs.TextFd(p, b, flags)
	if err != nil {
		return fail(err, Emulated)
	}
	return installHost(r, hfd, flags, Emulated)
}

// installHost gives the guest kbox's host fd hfd (an O_PATH one as a
// virtual fd), closing kbox's.
func installHost(r *Request, hfd, flags int, d Disposition) Result {
	if flags&unix.O_PATH != 0 {
		return hostPathFd(r, hfd, flags&unix.O_CLOEXEC != 0)
	}
	defer unix.Close(hfd)
	gfd, err := r.G.AddFDReply(hfd, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, d)
	}
	return answered(int64(gfd), d)
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
	return procfs.Stat((*procSys)(e), e.Shadows, t.Path, t.Proc, nofollow, st)
}

// procOwner sets uid and gid, of the host's stat of host target t, to
// the owner Linux gives a /proc/PID entry when t is one
// (procfs.TaskOwner): the process's effective ids, not kbox's.
func (e *Engine) procOwner(t *guestpath.Target, uid, gid *uint32) {
	if !t.Host || t.Bind != nil || t.Route != "/proc" {
		return
	}
	if u, g, ok := procfs.TaskOwner((*procSys)(e), t.Rel); ok {
		*uid, *gid = u, g
	}
}

// procReadlink answers readlink of a node: a link's text; EINVAL for
// anything else, as for a file that is no link.
func (e *Engine) procReadlink(r *Request, t guestpath.Target) (string, unix.Errno) {
	if t.Tail != "" || t.Proc.Kind != procfs.Link {
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
	return procfs.Access(e.procConfig(), t.Proc, mode, r.P.creds().mayWrite, func() bool { return e.guestAdmin(r) })
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
	if t.Proc.Kind == procfs.Obj {
		if t.Proc.Fd.Path == "" {
			return errno(unix.EACCES, Denied)
		}
		nt, en := e.classifyN(r, t.Proc.Fd.Path, 1)
		if en != 0 {
			return errno(en, Emulated)
		}
		return e.chdirTo(r, nt)
	}
	r.P.SetCwd(t.Path)
	return ok(0, Emulated)
}

// procStatfs serves statfs of a node (links followed): /proc's, or the
// filesystem of what a link leads to.
func (e *Engine) procStatfs(r *Request, t guestpath.Target, sf *unix.Statfs_t) (guestpath.Target, unix.Errno) {
	t, en := e.followProc(r, t)
	if en != 0 || t.Proc == nil {
		return t, en
	}
	return t, procfs.Statfs(t.Proc, sf)
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

// procWriteCheck is procfs.WriteCheck for the caller.
func (e *Engine) procWriteCheck(r *Request, rel string) unix.Errno {
	return procfs.WriteCheck((*procSys)(e), &procfs.Caller{Tgid: r.P.Tgid}, rel, r.P.creds().mayWrite)
}

// fdRefOf describes fd of guest process tgid (procfs.FdRef).
func (e *Engine) fdRefOf(tgid, fd int) (*procfs.FdRef, unix.Errno) {
	if fd >= e.Opt.VirtualFDs {
		p := e.procOf(tgid)
		if p == nil {
			return nil, unix.ENOENT
		}
		ent, found := p.FDs.Get(fd)
		if !found {
			return nil, unix.ENOENT
		}
		return procfs.VirtualFdRef((*procSys)(e), e.procConfig(), ent.File)
	}
	if e.hostFdHidden(tgid, fd) {
		return nil, unix.ENOENT
	}
	return procfs.GuestFdRef((*procSys)(e), e.procConfig(), tgid, fd, e.Shadows.OfGuestFd(tgid, fd))
}

// followFd is where following the link of ref leads: a guest path, or
// what the fd is (a procfs.Obj node).
func (e *Engine) followFd(r *Request, ref *procfs.FdRef) (guestpath.Target, unix.Errno) {
	if ref.LKLFd < 0 && ref.Path != "" {
		return e.classifyN(r, ref.Path, 1)
	}
	p := ref.Path
	if p == "" {
		p = ref.Text
	}
	t := procTarget(p, &procfs.Node{Kind: procfs.Obj, Fd: ref})
	if ref.Path != "" && e.Opt.Policy != nil && e.Opt.Policy.paths {
		// The fd's file by its path now (policy.go).
		if en := e.policyPath(r, &t); en != 0 {
			return guestpath.Target{}, en
		}
	}
	return t, 0
}

// reopenFd serves an open through an fd link: a new description of what
// the fd is, with the caller's flags.
func (e *Engine) reopenFd(r *Request, ref *procfs.FdRef, flags int, mode uint32) Result {
	if ref.LKLFd < 0 {
		hfd, en, denied := procfs.ReopenHost(ref, flags)
		switch {
		case en != 0 && denied:
			return errno(en, Denied)
		case en == unix.ENOENT && ref.Host == "":
			return errno(en, Emulated)
		case en != 0:
			return errno(en, Host)
		}
		return installHost(r, hfd, flags, Host)
	}
	p := ref.Path
	if p == "" {
		p = strings.TrimSuffix(ref.Text, " (deleted)")
	}
	if !e.Opt.HasKernelProc {
		t, en := e.classifyN(r, p, 1)
		if en != 0 {
			return errno(en, LKL)
		}
		return e.openTarget(r, t, flags, mode)
	}
	// The same inode again, through LKL's magic link, with the caller's
	// credentials and flags (O_CREAT and O_EXCL mean nothing for a file
	// that exists).
	e.stats.Changed()
	lflags, probe := lklOpenFlags(flags &^ (unix.O_CREAT | unix.O_EXCL))
	fd, le := e.lklOpenAt(r, uintptr(e.Opt.KernelProc), "self/fd/"+strconv.Itoa(ref.LKLFd), lflags, 0, flags)
	if le != 0 {
		return errno(le, LKL)
	}
	return e.openLKL(r, int(fd), p, flags, probe)
}

// openProcLink serves open(O_PATH|O_NOFOLLOW) of t, a link node.
func (e *Engine) openProcLink(r *Request, t guestpath.Target, flags int) Result {
	hfd, err := procfs.LinkStandIn((*procSys)(e), t.Proc)
	if err != nil {
		return errno(unix.ENOENT, Emulated)
	}
	gfd, err := r.P.FDs.OpenNode(hfd, procfs.LinkFile{}, t.Path, flags&^unix.O_CLOEXEC, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Emulated)
	}
	return ok(int64(gfd), Emulated)
}

// procLinkPath returns the guest path of the /proc link that virtual fd
// fd is an O_PATH fd of, if it is one.
func procLinkPath(r *Request, fd int) (string, bool) {
	ent, found := r.P.FDs.Get(fd)
	if !found {
		return "", false
	}
	if _, is := ent.File.Node.(procfs.LinkFile); !is {
		return "", false
	}
	return ent.File.Path, true
}

// readlinkOut answers readlinkat(fd, "") of an O_PATH fd of the /proc
// link at p: its text now, truncated to size bytes, at buf.
func (e *Engine) readlinkOut(r *Request, p string, buf, size uint64) Result {
	t, en := e.classify(r, p)
	switch {
	case en != 0:
	case t.Proc == nil:
		en = unix.ENOENT
	default:
		var l string
		if l, en = e.procReadlink(r, t); en == 0 {
			out := []byte(l)[:min(uint64(len(l)), size, PathMax)]
			if err := r.G.Write(buf, out); err != nil {
				return errno(unix.EFAULT, Emulated)
			}
			return ok(int64(len(out)), Emulated)
		}
	}
	return errno(en, Emulated)
}

// openVar opens writable node n (at guest path p) for writing (a
// procfs.Var), after the permission check of its owner's file.
func (e *Engine) openVar(r *Request, p string, n *procfs.Node, flags int) Result {
	if !procfs.MayStore(n, r.P.creds().mayWrite) {
		return errno(unix.EACCES, Emulated)
	}
	acc := flags & unix.O_ACCMODE
	if acc == unix.O_RDONLY {
		return e.openText(r, p, n.Text(), flags&^unix.O_TRUNC) // O_TRUNC asked for write permission only
	}
	v, hfd, err := procfs.NewVar(n, p, acc)
	if err != nil {
		return fail(err, Emulated)
	}
	gfd, err := r.P.FDs.OpenNode(hfd, v, p, flags, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Emulated)
	}
	return ok(int64(gfd), Emulated)
}

// varIO serves write and pwrite64 of a writable /proc file (the
// position does not matter); reads are its memfd's.
func varIO(r *Request, v *procfs.Var, hfd int, write, withOff bool) Result {
	if !write {
		return hostIO(r, hfd, false, withOff)
	}
	w, en := v.Write(r.G, r.P.IDs(), hfd, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, Emulated)
	}
	return ok(w, Emulated)
}

// varVecIO serves readv, writev and their positioned forms on the
// writable /proc file behind virtual fd r.Args[0] (procfs.Var.VecIO).
func varVecIO(r *Request, v *procfs.Var, hfd int, write bool, off int64) Result {
	iov, _, en := readIovecs(r, r.Args[1], r.Args[2])
	if en != 0 {
		return errno(en, Emulated)
	}
	segs := make([]procfs.Seg, len(iov))
	for i, s := range iov {
		segs[i] = procfs.Seg{Addr: s.base, Len: s.len}
	}
	done, en := v.VecIO(r.G, r.P.IDs(), hfd, segs, write, off)
	if en != 0 {
		return errno(en, Emulated)
	}
	return ok(done, Emulated)
}

// bridgeVar serves a dup2 of a writable /proc file open for writing onto
// host fd number target: a pipe whose content a pump writes to the file
// (procfs.Var.Pump), with the dup2's caller's credentials then. A
// read-write open is EINVAL, as for an LKL file (bridge.go).
func (e *Engine) bridgeVar(r *Request, f *fdtable.File, v *procfs.Var, target int, cloexec bool) Result {
	if f.Flags&unix.O_ACCMODE != unix.O_WRONLY {
		return errno(unix.EINVAL, Emulated)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return fail(err, Emulated)
	}
	_, err := r.G.AddFD(p[1], target, cloexec)
	unix.Close(p[1])
	if err != nil {
		unix.Close(p[0])
		return fail(err, Emulated)
	}
	owner := r.P
	e.writePump(p[0], func(pm *pump) {
		v.Pump(pm.src, owner.IDs, pm.busy.Store)
	})
	return ok(int64(target), Emulated)
}

// varOf returns the writable /proc file behind a guest virtual fd.
func varOf(r *Request, fd uint64) (*procfs.Var, int, bool) {
	ent, found := r.P.FDs.Get(int(int32(fd)))
	if !found || !ent.File.Host {
		return nil, -1, false
	}
	v, isVar := ent.File.Node.(*procfs.Var)
	return v, ent.File.HostFd, isVar
}

// procSys is the engine as package procfs sees it (procfs.System): its
// processes, their fds, kbox's mounts. Only paths under /proc reach it.
// A guest process (Proc) is a procfs.Process: the values kbox keeps of its
// identity (procfs.Ident: oom_score_adj, the in-process tier's main
// thread and strings) live in it; the parent a process shows (stat,
// status, getppid) is the engine's to know (shownParent).
type procSys Engine

var _ procfs.System = (*procSys)(nil)

// procCaller is the calling thread as package procfs sees it.
func (e *Engine) procCaller(r *Request) *procfs.Caller {
	return &procfs.Caller{Tgid: r.P.Tgid, Tid: r.G.Pid(), Self: r.P, Mem: r.G}
}

// procOf returns the process the engine knows by a thread or process id.
func (e *Engine) procOf(id int) *Proc { return (*e.procs.Load())[id] }

func (s *procSys) Config() procfs.Config {
	return procfs.Config{VirtualFDs: s.Opt.VirtualFDs, KernelProc: s.Opt.KernelProc, HasKernelProc: s.Opt.HasKernelProc}
}

// GuestTask: the caller, or a descendant of the keeper (which the keeper
// and kbox are not; see isGuest).
func (s *procSys) GuestTask(c *procfs.Caller, pid int) bool {
	e := (*Engine)(s)
	if pid == c.Tgid || pid == c.Tid {
		return true
	}
	if e.Keeper <= 0 && e.RootPid <= 0 {
		return e.procOf(pid) != nil // no supervisor (tests): what the engine knows
	}
	return e.isGuest(pid)
}

func (s *procSys) TgidOf(c *procfs.Caller, pid int) int { return (*Engine)(s).tgidOf(c.Tgid, pid) }

// tgidOf returns the process id of guest task pid, for a caller of
// process id self.
func (e *Engine) tgidOf(self, pid int) int {
	if pid == self {
		return pid
	}
	if p := e.procOf(pid); p != nil {
		return p.Tgid
	}
	if tgid, ok := statusField(pid, "Tgid"); ok {
		return tgid
	}
	return pid
}

func (s *procSys) Process(tgid int, register bool) procfs.Process {
	e := (*Engine)(s)
	p := e.procOf(tgid)
	if p == nil && register {
		p = e.Lookup(tgid)
	}
	if p == nil {
		return nil
	}
	return p
}

func (s *procSys) InitCreds() procfs.Creds { return s.initCred.ids() }

func (s *procSys) ShownParent(tgid int) (int, bool) { return (*Engine)(s).shownParent(tgid) }

func (s *procSys) Keepers() (int, int) { return s.Keeper, s.Binder }

func (s *procSys) Known() []int { return (*Engine)(s).Tgids(nil) }

func (s *procSys) FdRef(tgid, fd int) (*procfs.FdRef, unix.Errno) {
	return (*Engine)(s).fdRefOf(tgid, fd)
}

func (s *procSys) VirtualFds(tgid int) []int {
	p := (*Engine)(s).procOf(tgid)
	if p == nil {
		return nil
	}
	v, _ := p.FDs.Fds()
	return v
}

// HostFdHidden: only in the in-process tiers, whose guest is kbox's own
// process, is a host fd none of the guest's (GuestFdOpen).
func (s *procSys) HostFdHidden(tgid, fd int) bool { return (*Engine)(s).hostFdHidden(tgid, fd) }

func (e *Engine) hostFdHidden(tgid, fd int) bool {
	return e.GuestFdOpen != nil && tgid == os.Getpid() && !e.GuestFdOpen(fd)
}

func (s *procSys) HostProc() (int, error) { return guestpath.RouteRoot("/proc") }

func (s *procSys) BindPath(path string) (string, bool) { return (*Engine)(s).bindGuestPath(path) }

func (s *procSys) PtsPath(dev uint64, name string) (string, bool) { return s.pts.PathOf(dev, name) }

func (s *procSys) OnRoute(path string) bool {
	_, on := (*Engine)(s).route(path)
	return on
}

func (s *procSys) FIFOPath(dev, ino uint64) (string, bool) { return s.FIFOs.PathOf(dev, ino) }

// Inotify: sys_file_inotify.go's sockets.
func (s *procSys) Inotify(ino uint64) bool { return s.notify.has(ino) }

func (s *procSys) Fdinfo(tgid, fd int) (func() []byte, bool) {
	e := (*Engine)(s)
	if fd < s.Config().VirtualFDs {
		// A host fd: the guest's inotify fd is shown as one.
		if s.notify.live.Load() == 0 {
			return nil, false
		}
		var st unix.Stat_t
		dir := "/proc/" + strconv.Itoa(tgid)
		if unix.Stat(dir+"/fd/"+strconv.Itoa(fd), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return nil, false
		}
		return s.notify.fdinfo(s.Config(), st.Ino, dir+"/fdinfo/"+strconv.Itoa(fd))
	}
	p := e.procOf(tgid)
	if p == nil {
		return nil, false
	}
	ent, found := p.FDs.Get(fd)
	if !found {
		return nil, false
	}
	return func() []byte { return procfs.VirtualFdinfo(s.Config(), ent, getfl) }, true
}

// Shadow is the shadow whose content is host file (dev, ino), or nil.
func (s *procSys) Shadow(dev, ino uint64) *shadowfd.Node { return s.Shadows.Lookup(dev, ino) }

// Canonical is image path p with its links followed.
func (s *procSys) Canonical(p string) string { return (*Engine)(s).canonical(p) }

// Mounts: the host routes (but guestpath.CPURoute, a directory of the guest's
// /sys, not a mount of its own), then the binds.
func (s *procSys) Mounts() []procfs.KboxMount {
	var out []procfs.KboxMount
	for _, rt := range s.Opt.HostRoutes {
		if rt != guestpath.CPURoute {
			out = append(out, procfs.KboxMount{Point: rt, Root: -1})
		}
	}
	for _, b := range s.Opt.Binds {
		out = append(out, procfs.KboxMount{Point: b.Guest, Root: b.Root, ReadOnly: b.ReadOnly})
	}
	return out
}

func (s *procSys) IPCSysctl(name string) *procfs.Node { return (*Engine)(s).ipcSysctl(name) }

func (s *procSys) Sysvipc(abs, sub string) (*procfs.Node, unix.Errno) {
	return (*Engine)(s).procSysvipc(abs, sub)
}

// forkIdent is what a child takes of p's identity at fork: the OOM
// values (a new process is never an in-process tier's main thread).
func (p *Proc) forkIdent() procfs.Ident {
	p.mu.Lock()
	defer p.mu.Unlock()
	return procfs.Ident{OOMAdj: p.ident.OOMAdj, OOMMin: p.ident.OOMMin}
}

// SetMain says, for an in-process tier, that host thread tid stands for
// the process's main thread in its /proc (comm, the name in stat and
// status), and where its argument and environment strings lie in its
// memory: [argStart, argEnd, envStart, envEnd).
func (p *Proc) SetMain(tid int, args [4]uint64) {
	p.mu.Lock()
	p.ident.Leader, p.ident.Args = tid, args
	p.mu.Unlock()
}

// Ident returns what kbox keeps of p's identity (procfs.Process).
func (p *Proc) Ident() procfs.Ident {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ident
}

// UpdateIdent changes p's identity under its lock (procfs.Process).
func (p *Proc) UpdateIdent(f func(*procfs.Ident) unix.Errno) unix.Errno {
	p.mu.Lock()
	defer p.mu.Unlock()
	return f(&p.ident)
}

// IDs returns p's credentials as /proc's rules read them
// (procfs.Process).
func (p *Proc) IDs() procfs.Creds { return p.creds().ids() }

// ids is c as /proc's rules read it.
func (c *Cred) ids() procfs.Creds {
	return procfs.Creds{UID: c.UID, EUID: c.EUID, SUID: c.SUID, FSUID: c.FSUID,
		GID: c.GID, EGID: c.EGID, SGID: c.SGID, FSGID: c.FSGID, Groups: c.Groups, Eff: c.Eff,
		Perm: c.Perm, Inh: c.Inh, Bnd: c.Bnd, Amb: c.Amb, NoNewPrivs: c.NoNewPrivs}
}

// shownParent returns the parent guest process tgid shows (stat,
// status, getppid), and whether that hides its host parent: 0 for a
// parent that is not a guest process.
func (e *Engine) shownParent(tgid int) (int, bool) {
	if tgid == e.RootPid && tgid > 0 {
		return 0, true // the keeper's child, or kbox's own process
	}
	if p := e.procOf(tgid); p != nil {
		// The process that forked it, while it lives: a process is
		// reparented only when its parent exits.
		if pp := p.parent.Load(); pp != nil {
			if pp.Tgid == e.Keeper && e.Keeper > 0 {
				return 0, true // a session's spawner (BeginSession)
			}
			if pp.pidfd.Load() > 0 && pp.alive(pp.Tgid) { // released at its exit: no pidfd
				return pp.Tgid, false
			}
			p.parent.Store(nil)
		}
	}
	host, found := statusField(tgid, "PPid")
	if !found || host <= 0 {
		return 0, false
	}
	if e.parentIsGuest(host) {
		return host, false
	}
	return 0, true
}

// parentIsGuest reports whether host process pid, some guest process's
// parent, is a guest process.
func (e *Engine) parentIsGuest(pid int) bool {
	switch {
	case e.Keeper > 0 && pid == e.Keeper:
		return false
	case e.procOf(pid) != nil:
		// A process the engine knows is the guest's, and a live
		// process's parent cannot be a dead one's reused id (the
		// child would have been reparented): no walk up the tree.
		return true
	case e.Keeper <= 0 && e.RootPid <= 0:
		return false // no supervisor (tests): what the engine knows
	}
	return e.isGuest(pid)
}
