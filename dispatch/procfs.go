package dispatch

import (
	"runtime"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/lkl"
	"golang.org/x/sys/unix"
)

// The guest's /proc (docs/guest-view.md, docs/tiers.md "The guest's /proc").
//
// kbox answers every path under /proc itself. classifyProc maps a clean
// guest path under /proc, for the calling process, to one of:
//   - a path beneath the host's /proc, opened confined like any host
//     route: the files of a guest process (guest processes are host
//     processes, so the host's files for them are right), and the few
//     system-wide files shown as the host has them (procTop);
//   - a node kbox answers (procNode): a file or directory of LKL's own
//     proc (procLKL), a file whose text kbox makes (procText, installed as
//     a sealed memfd so that reads are native), a directory whose entries
//     kbox makes (procDir, a virtual fd with an fdtable.Listing), a
//     symbolic link (procLink: self, cwd, root, exe, fd/N, ...) or the
//     object an fd link names, when that link is followed (procObj);
//   - an errno: ENOENT for a pid that is no guest process and for any
//     system-wide name not in procTop.
//
// Links are resolved as guest paths: following cwd, root, exe or an fd
// link to a path leads where that guest path leads, never to a host path.
// Only paths under /proc pay for any of this.

// procMaxDepth bounds the links followed while resolving one path.
const procMaxDepth = 8

type procKind uint8

const (
	procLKL  procKind = iota + 1 // a file or directory of LKL's proc
	procText                     // a file whose text kbox makes
	procDir                      // a directory whose entries kbox makes
	procLink                     // a symbolic link kbox answers
	procObj                      // what an fd link names, followed
)

// procNode is a /proc path that kbox answers itself (Target.Proc).
type procNode struct {
	kind procKind
	// lkl is a procLKL node's path beneath LKL's proc; write says the
	// guest may open it for writing (the UTS names, with CAP_SYS_ADMIN).
	lkl   string
	write bool
	// text makes a procText file's content, list a procDir's entries.
	text func() []byte
	list func() []fdtable.Dirent
	// like is the path beneath the host's /proc whose (l)stat a procText,
	// procDir or procLink node reports, with mode's permission bits when
	// mode is set.
	like string
	mode uint32
	// link is a procLink's text; following it leads to the guest path to,
	// or, for an fd link, to what fd names.
	link string
	to   string
	fd   *fdRef
	// stat, when set, stats a node outside /proc (netfiles.go) instead
	// of like.
	stat func(st *unix.Stat_t) unix.Errno
	// store, when set, makes a procText file writable (procvar.go): it
	// serves a write's bytes. owner is the process the file belongs to,
	// whose effective ids the permission check takes.
	store func(r *Request, b []byte) (int, unix.Errno)
	owner *Proc
}

func (n *procNode) isDir() bool { return n.kind == procDir }

// procTarget is the Target of a node: Host with no route, so that a
// handler that does not know nodes fails (ENOENT, or EACCES for a change)
// rather than reach anything.
func procTarget(abs string, n *procNode) Target {
	return Target{Host: true, Path: abs, Proc: n}
}

// procHost is the Target of abs served from the host's /proc at rel.
func procHost(abs, rel string) Target {
	return Target{Host: true, Path: abs, Route: "/proc", Rel: rel}
}

// procTop lists the system-wide names of the guest's /proc, in listing
// order (sysvipc, there with an IPC namespace, comes after sys: ipc.go);
// every other name that is not a pid is ENOENT. Why each is
// served the way it is: docs/security.md.
var procTop = []struct {
	name string
	kind procKind // 0: the host's file
	dt   uint8
}{
	{"cmdline", procLKL, unix.DT_REG},
	{"config.gz", procLKL, unix.DT_REG}, // LKL's, when it has one (proctext.go)
	{"cpuinfo", 0, unix.DT_REG},
	{"devices", procLKL, unix.DT_REG},
	{"diskstats", procLKL, unix.DT_REG},
	{"filesystems", procLKL, unix.DT_REG},
	{"loadavg", procText, unix.DT_REG},
	{"meminfo", 0, unix.DT_REG},
	{"mounts", procLink, unix.DT_LNK},
	{"net", procLink, unix.DT_LNK},
	{"partitions", procLKL, unix.DT_REG},
	{"self", procLink, unix.DT_LNK},
	{"stat", procText, unix.DT_REG},
	{"sys", procLKL, unix.DT_DIR},
	{"thread-self", procLink, unix.DT_LNK},
	{"uptime", procText, unix.DT_REG},
	{"version", procLKL, unix.DT_REG},
}

// procSensitive are the entries of a process that Linux shows only to a
// caller that may ptrace it (PTRACE_MODE_READ_FSCREDS): kbox checks that
// with the guest's credentials (mayInspect).
var procSensitive = map[string]bool{
	"environ": true, "auxv": true, "mem": true, "maps": true, "smaps": true, "smaps_rollup": true,
	"numa_maps": true, "pagemap": true, "stack": true, "syscall": true, "personality": true,
	"io": true, "fd": true, "fdinfo": true, "cwd": true, "root": true, "exe": true, "map_files": true,
}

// isPidName reports a decimal pid as /proc names it: digits, no leading 0.
func isPidName(s string) bool {
	if s == "" || len(s) > 10 || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// classifyProc resolves abs, a clean guest path at or below /proc, for
// the calling process; depth counts the links followed so far.
func (e *Engine) classifyProc(r *Request, abs string, depth int) (Target, unix.Errno) {
	if depth > procMaxDepth {
		return Target{}, unix.ELOOP
	}
	rest := strings.TrimPrefix(abs, "/proc")
	if rest == "" {
		return procTarget(abs, &procNode{kind: procDir, like: ".", list: func() []fdtable.Dirent { return e.procRootList() }}), 0
	}
	name, sub, _ := strings.Cut(rest[1:], "/")
	tgid := strconv.Itoa(r.P.Tgid)
	switch name {
	case "self":
		if sub == "" {
			return procTarget(abs, &procNode{kind: procLink, like: "self", link: tgid, to: "/proc/" + tgid}), 0
		}
		return e.procPid(r, r.P.Tgid, sub, depth)
	case "thread-self":
		l := tgid + "/task/" + strconv.Itoa(r.G.Pid())
		if sub == "" {
			return procTarget(abs, &procNode{kind: procLink, like: "thread-self", link: l, to: "/proc/" + l}), 0
		}
		return e.classifyProc(r, "/proc/"+l+"/"+sub, depth)
	}
	if isPidName(name) {
		pid, err := strconv.Atoi(name)
		if err != nil {
			return Target{}, unix.ENOENT
		}
		return e.procPid(r, pid, sub, depth)
	}
	return e.procTopNode(r, name, sub, depth)
}

// procTopNode resolves a system-wide name of /proc (procTop).
func (e *Engine) procTopNode(r *Request, name, sub string, depth int) (Target, unix.Errno) {
	abs := "/proc/" + name
	if sub != "" {
		abs += "/" + sub
	}
	if name == "sysvipc" {
		return e.procSysvipc(abs, sub) // ipc.go
	}
	for _, t := range procTop {
		if t.name != name {
			continue
		}
		switch t.kind {
		case 0:
			if sub != "" {
				return Target{}, unix.ENOTDIR
			}
			return procHost(abs, name), 0
		case procLKL:
			if !e.Opt.HasKernelProc {
				return Target{}, unix.ENOENT
			}
			if t.dt != unix.DT_DIR && sub != "" {
				return Target{}, unix.ENOTDIR
			}
			rel := abs[len("/proc/"):]
			if rel == "config.gz" {
				return e.procConfigGz(abs) // proctext.go
			}
			if rel == "sys/kernel/pid_max" {
				// Guest pids are the host's: so is their bound
				// (LKL's own is 4096).
				return procTarget(abs, &procNode{kind: procText, like: rel, text: hostPidMax}), 0
			}
			return procTarget(abs, &procNode{kind: procLKL, lkl: rel, write: utsProcFile(abs)}), 0
		case procText:
			if sub != "" {
				return Target{}, unix.ENOTDIR
			}
			return procTarget(abs, &procNode{kind: procText, like: name, text: e.procSystemText(name)}), 0
		case procLink:
			to := "self/" + name // mounts, net
			if sub != "" {
				return e.classifyProc(r, "/proc/"+to+"/"+sub, depth+1)
			}
			return procTarget(abs, &procNode{kind: procLink, like: name, link: to, to: "/proc/" + to}), 0
		}
	}
	return Target{}, unix.ENOENT
}

// procPid resolves sub beneath /proc/PID.
func (e *Engine) procPid(r *Request, pid int, sub string, depth int) (Target, unix.Errno) {
	if !e.guestTask(r, pid) {
		return Target{}, unix.ENOENT
	}
	base := "/proc/" + strconv.Itoa(pid)
	if sub == "" {
		return procHost(base, base[len("/proc/"):]), 0
	}
	entry, rest, _ := strings.Cut(sub, "/")
	if entry != "task" || rest == "" {
		return e.procTask(r, pid, base, sub, depth)
	}
	tid, rest2, _ := strings.Cut(rest, "/")
	tbase := base + "/task/" + tid
	if rest2 == "" || !isPidName(tid) {
		abs := base + "/" + sub
		return procHost(abs, abs[len("/proc/"):]), 0
	}
	var st unix.Stat_t
	if unix.Stat(tbase, &st) != nil { // a thread of that process?
		return Target{}, unix.ENOENT
	}
	return e.procTask(r, pid, tbase, rest2, depth)
}

// procTask resolves sub beneath base, a guest process's or thread's
// directory (/proc/PID or /proc/PID/task/TID) of process or thread pid.
func (e *Engine) procTask(r *Request, pid int, base, sub string, depth int) (Target, unix.Errno) {
	entry, rest, _ := strings.Cut(sub, "/")
	abs := base + "/" + sub
	hbase := base[len("/proc/"):]
	if procSensitive[entry] && !e.mayInspect(r, pid) {
		return Target{}, unix.EACCES
	}
	switch entry {
	case "fd":
		return e.procFdPath(r, e.tgidOf(r, pid), base, rest, depth)
	case "fdinfo":
		return e.procFdinfoPath(r, e.tgidOf(r, pid), base, rest)
	case "cwd", "root", "exe":
		var to string
		p := e.procOf(e.tgidOf(r, pid))
		switch {
		case entry == "root":
			to = "/"
		case p == nil:
			return Target{}, unix.ENOENT
		case entry == "cwd":
			to = p.Cwd()
		default:
			if to = p.Exe(); to == "" {
				return Target{}, unix.ENOENT
			}
		}
		if rest != "" {
			if entry == "exe" {
				return Target{}, unix.ENOTDIR
			}
			return e.classifyN(r, Clean(to, rest), depth+1)
		}
		return procTarget(abs, &procNode{kind: procLink, like: hbase + "/" + entry, link: to, to: to}), 0
	case "mounts", "mountinfo", "mountstats":
		if rest != "" {
			return Target{}, unix.ENOTDIR
		}
		return procTarget(abs, &procNode{kind: procText, like: hbase + "/" + entry, text: e.mountText(entry)}), 0
	case "cgroup", "cpuset":
		// The host's cgroup paths name the host's slices and units: the
		// guest is at the root of its own hierarchy, as in a cgroup
		// namespace.
		if rest != "" {
			return Target{}, unix.ENOTDIR
		}
		text := "0::/\n"
		if entry == "cpuset" {
			text = "/\n"
		}
		return procTarget(abs, &procNode{kind: procText, like: hbase + "/" + entry, text: func() []byte { return []byte(text) }}), 0
	case "net":
		// The host's network is not the guest's: LKL's, as /proc/net.
		if !e.Opt.HasKernelProc {
			return Target{}, unix.ENOENT
		}
		rel := "self/net"
		if rest != "" {
			rel += "/" + rest
		}
		return procTarget(abs, &procNode{kind: procLKL, lkl: rel}), 0
	case "map_files":
		// Its links name the host files behind the mappings (the
		// prepared programs' memfds, shadows' content): an empty
		// directory, as Linux shows it to a caller without
		// CAP_SYS_ADMIN.
		if rest != "" {
			return Target{}, unix.EACCES
		}
		return procTarget(abs, &procNode{kind: procDir, like: hbase + "/map_files", list: func() []fdtable.Dirent {
			return []fdtable.Dirent{{Ino: 1, Type: unix.DT_DIR, Name: "."}, {Ino: 1, Type: unix.DT_DIR, Name: ".."}}
		}}), 0
	case "oom_score_adj", "oom_adj", "comm", "stat", "status", "cmdline", "environ":
		if t, en, done := e.procIdentEntry(r, pid, base, entry, rest); done { // procident.go
			return t, en
		}
	}
	return procHost(abs, abs[len("/proc/"):]), 0
}

// followProc follows t while it is a link node, as the kernel follows a
// path's last component; what is not a link comes back as it is.
func (e *Engine) followProc(r *Request, t Target) (Target, unix.Errno) {
	tail := t.Tail
	t.Tail = ""
	for i := 0; t.Proc != nil && t.Proc.kind == procLink; i++ {
		if i >= procMaxDepth {
			return Target{}, unix.ELOOP
		}
		n := t.Proc
		var en unix.Errno
		switch {
		case n.fd != nil:
			t, en = e.followFd(r, n.fd)
		default:
			t, en = e.classifyN(r, n.to, 1)
		}
		if en != 0 {
			return Target{}, en
		}
	}
	if tail != "" {
		if en := e.checkDirTail(r, &t, tail); en != 0 {
			return Target{}, en
		}
	}
	return t, 0
}

// checkDirTail applies a trailing slash of the guest's path to t, a
// target reached through /proc: it must be a directory.
func (e *Engine) checkDirTail(r *Request, t *Target, tail string) unix.Errno {
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
func (e *Engine) procTail(r *Request, t Target) (Target, unix.Errno) {
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
func (e *Engine) procOpen(r *Request, t Target, flags int, mode uint32) Result {
	var en unix.Errno
	if t.Proc.kind == procLink {
		if flags&unix.O_NOFOLLOW != 0 {
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
	switch n.kind {
	case procLKL:
		if writes && (!n.write || !e.guestAdmin(r)) {
			return errno(unix.EACCES, Denied) // LKL's sysctls are not the guest's to change
		}
		lflags := int(lkl.OpenFlagsToLKL(uint32(flags&^(unix.O_CLOEXEC|unix.O_CREAT)))) | unix.O_CLOEXEC
		fd, le := e.kprocPath(lkl.SysOpenat, 1, n.lkl+t.Tail, [6]uintptr{0, 0, uintptr(lflags)})
		if le != 0 {
			return errno(le, LKL)
		}
		gfd, err := r.P.FDs.Open(int(fd), t.Path, flags, cloexec)
		if err != nil {
			return fail(err, LKL)
		}
		return ok(int64(gfd), LKL)
	case procDir:
		if writes || flags&unix.O_CREAT != 0 {
			return errno(unix.EISDIR, Emulated)
		}
		gfd, err := r.P.FDs.OpenListing(fdtable.NewListing(n.list), t.Path, flags, cloexec)
		if err != nil {
			return fail(err, Emulated)
		}
		return ok(int64(gfd), Emulated)
	case procText:
		switch {
		case flags&unix.O_DIRECTORY != 0:
			return errno(unix.ENOTDIR, Emulated)
		case writes && n.store != nil:
			return e.openVar(r, t.Path, n, flags) // procvar.go
		case writes:
			return errno(unix.EACCES, Emulated)
		}
		return e.openText(r, t.Path, n.text(), flags)
	case procObj:
		return e.reopenFd(r, n.fd, flags, mode)
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
	hfd, err := unix.Open(procFd(mfd), rflags, 0)
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
	root, err := routeRoot("/proc")
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
func (e *Engine) procStat(r *Request, t Target, nofollow bool, st *unix.Stat_t) unix.Errno {
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
	switch n.kind {
	case procLKL:
		flags := uintptr(0)
		if nofollow {
			flags = unix.AT_SYMLINK_NOFOLLOW
		}
		var lst lkl.Stat64
		_, le := e.kprocPath(lkl.SysNewfstatat, 1, n.lkl, [6]uintptr{0, 0, lkl.PtrOf(&lst), flags})
		runtime.KeepAlive(&lst)
		if le != 0 {
			return le
		}
		lst.ToHost(st)
		return 0
	case procObj:
		return e.statFd(r, n.fd, st)
	}
	if n.stat != nil {
		return n.stat(st)
	}
	if err := hostProcStat(n.like, n.kind == procLink, st); err != nil {
		// A link of a virtual fd has no host counterpart: the
		// process's exe link stands for it.
		if n.kind != procLink || hostProcStat(strings.TrimSuffix(procBase(n.like), "/")+"/exe", true, st) != nil {
			return unix.ENOENT
		}
	}
	switch n.kind {
	case procText:
		st.Mode = unix.S_IFREG | 0o444
		if n.store != nil {
			st.Mode |= 0o200
		}
		st.Size, st.Blocks = 0, 0
	case procDir:
		if t.Path == "/proc" {
			st.Nlink = 2 // and a link per process directory, not the host's count
			for range e.guestTgids() {
				st.Nlink++
			}
		}
	case procLink:
		if n.mode != 0 {
			st.Mode = unix.S_IFLNK | n.mode
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
func (e *Engine) statTarget(r *Request, t Target, nofollow bool, st *unix.Stat_t) unix.Errno {
	switch {
	case t.Proc != nil:
		return e.procStat(r, t, nofollow, st)
	case t.Host:
		flags := 0
		if nofollow {
			flags = unix.AT_SYMLINK_NOFOLLOW
		}
		err := atRoute(t, nofollow, func(d int, name string, empty int) error { return unix.Fstatat(d, name, st, flags|empty) })
		if err != nil {
			return errnoOf(err)
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
func (e *Engine) procReadlink(r *Request, t Target) (string, unix.Errno) {
	if t.Tail != "" {
		return "", unix.EINVAL
	}
	if t.Proc.kind != procLink {
		return "", unix.EINVAL
	}
	return t.Proc.link, 0
}

// procAccess serves access(2) of a node (links followed).
func (e *Engine) procAccess(r *Request, t Target, mode int) unix.Errno {
	t, en := e.followProc(r, t)
	if en != 0 {
		return en
	}
	if t.Proc == nil {
		return e.accessTarget(r, t, mode, 0)
	}
	n := t.Proc
	switch n.kind {
	case procLKL:
		_, le := e.kprocPath(lkl.SysFaccessat2, 1, n.lkl, [6]uintptr{0, 0, uintptr(mode), unix.AT_EACCESS})
		if le == 0 && mode&unix.W_OK != 0 && (!n.write || !e.guestAdmin(r)) {
			return unix.EACCES
		}
		return le
	case procObj:
		if n.fd.lklfd >= 0 {
			_, le := e.kprocPath(lkl.SysFaccessat2, 1, "self/fd/"+strconv.Itoa(n.fd.lklfd), [6]uintptr{0, 0, uintptr(mode), unix.AT_EACCESS})
			return le
		}
		if n.fd.host == "" {
			return 0
		}
		return errnoOf(unix.Access(n.fd.host, uint32(mode)))
	case procDir:
		if mode&unix.W_OK != 0 {
			return unix.EACCES
		}
		return 0
	case procText:
		if n.store != nil && n.owner != nil && mode&unix.X_OK == 0 {
			o, c := n.owner.creds(), r.P.creds()
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
func (e *Engine) procChdir(r *Request, t Target) Result {
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
	if t.Proc.kind == procObj {
		if p = t.Proc.fd.path; p == "" {
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
func (e *Engine) procStatfs(r *Request, t Target, sf *unix.Statfs_t) (Target, unix.Errno) {
	t, en := e.followProc(r, t)
	if en != 0 || t.Proc == nil {
		return t, en
	}
	if t.Proc.kind == procObj {
		ref := t.Proc.fd
		if ref.lklfd >= 0 {
			_, le := lkl.Syscall6(lkl.SysFstatfs, uintptr(ref.lklfd), lkl.PtrOf(sf), 0, 0, 0, 0)
			return t, le
		}
		if ref.host != "" {
			return t, errnoOf(unix.Statfs(ref.host, sf))
		}
	}
	return t, errnoOf(unix.Statfs("/proc", sf))
}

// procExec resolves a node for execve: only a link that leads to a
// program of the image or of a bind can be run.
func (e *Engine) procExec(r *Request, t Target) (Target, unix.Errno) {
	t, en := e.followProc(r, t)
	if en != 0 {
		return t, en
	}
	if t.Proc != nil && t.Proc.kind == procObj && t.Proc.fd.path != "" {
		t, en = e.classifyN(r, t.Proc.fd.path, 1)
	}
	if en == 0 && t.Proc != nil {
		en = unix.EACCES
	}
	return t, en
}
