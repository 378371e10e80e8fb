package dispatch

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/shadowfd"
	"golang.org/x/sys/unix"
)

// The fds of a guest process in /proc/PID/fd and /proc/PID/fdinfo: its
// host fds (the host's /proc lists them) and its virtual fds (its fdtable).
//
// A link reads as the guest path of its file, or as the kernel's name of
// an object that has none ("pipe:[123]"):
//   - a virtual fd or a shadow: LKL's own link of the LKL file, which is
//     the file's current path in the image (renames followed, " (deleted)"
//     once it has no name), as Linux shows it;
//   - a host file in a bind: its guest path (bindGuestPath); on a host
//     route: its path; a text kbox made for /proc (a memfd named
//     "kbox:PATH"): PATH; a FIFO of the image: the path it was first
//     opened by;
//   - pipes, sockets, anonymous inodes, the guest's own memfds: the
//     kernel's text;
//   - a host file outside binds and routes (inherited from kbox's caller,
//     like a redirection of the shell that started kbox): the host's text.
//
// Following a link (open, stat, chdir, exec, a path through it) reopens
// what the fd is, as Linux does: an LKL file through LKL's own
// /proc/self/fd link of it (a new description of the same inode, opened
// with the caller's flags and credentials: a shadow's next description, a
// new virtual fd); a host file in a bind or on a route, a FIFO of the
// image and a generated directory through their guest paths (the bind's
// confinement and :ro hold); an object through the host's /proc link of
// the guest's fd (it is the guest's own). A host file outside binds and
// routes can only be reopened as a non-directory with an access mode the
// fd already has.

// freeFdName is the link text of the in-process tiers' placeholder of a
// free guest fd number (trap/fds.go's memfd "kbox:free-fd").
const freeFdName = "/memfd:kbox:free-fd"

// fdRef is a guest fd as its link shows it and as following it reaches
// it.
type fdRef struct {
	// text is the link's text.
	text string
	// path is the guest path that following leads to; "" when what the
	// fd is is reopened instead.
	path string
	dir  bool // the fd is a directory (a path through the link goes on there)
	// lklfd, when >= 0, is an LKL file of the fd's inode (a virtual fd's,
	// or node's: a shadow's), reopened through LKL's /proc/self/fd.
	lklfd int
	node  *shadowfd.Node
	// host is the host's /proc link of the fd (the guest's own, or of
	// kbox's copy of it), "" for a virtual fd.
	host    string
	outside bool // a host file outside binds and routes
	made    bool // a text kbox made for /proc (openText)
	acc     int  // the fd's access mode
}

// isFdName reports an fd number as /proc names it.
func isFdName(s string) bool { return s == "0" || isPidName(s) }

// procFdPath resolves rest beneath base/fd of guest process tgid.
func (e *Engine) procFdPath(r *Request, tgid int, base, rest string, depth int) (Target, unix.Errno) {
	hbase := base[len("/proc/"):]
	if rest == "" {
		return procTarget(base+"/fd", &procNode{kind: procDir, like: hbase + "/fd",
			list: func() []fdtable.Dirent { return e.fdList(tgid, unix.DT_LNK) }}), 0
	}
	num, rest2, _ := strings.Cut(rest, "/")
	if !isFdName(num) {
		return Target{}, unix.ENOENT
	}
	fd, err := strconv.Atoi(num)
	if err != nil {
		return Target{}, unix.ENOENT
	}
	ref, en := e.fdRefOf(tgid, fd)
	if en != 0 {
		return Target{}, en
	}
	if rest2 != "" {
		if ref.path == "" || !ref.dir {
			return Target{}, unix.ENOTDIR
		}
		return e.classifyN(r, Clean(ref.path, rest2), depth+1)
	}
	n := &procNode{kind: procLink, like: hbase + "/fd/" + num, link: ref.text, fd: ref}
	if ref.host == "" {
		n.mode = linkMode(ref.acc)
	}
	return procTarget(base+"/fd/"+num, n), 0
}

// linkMode is the permission bits of an fd link, as Linux gives them:
// r-x for reading, -wx for writing.
func linkMode(acc int) uint32 {
	switch acc {
	case unix.O_WRONLY:
		return 0o300
	case unix.O_RDWR:
		return 0o700
	}
	return 0o500
}

// procFdinfoPath resolves rest beneath base/fdinfo of guest process tgid.
func (e *Engine) procFdinfoPath(r *Request, tgid int, base, rest string) (Target, unix.Errno) {
	hbase := base[len("/proc/"):]
	if rest == "" {
		return procTarget(base+"/fdinfo", &procNode{kind: procDir, like: hbase + "/fdinfo",
			list: func() []fdtable.Dirent { return e.fdList(tgid, unix.DT_REG) }}), 0
	}
	num, rest2, _ := strings.Cut(rest, "/")
	switch {
	case !isFdName(num):
		return Target{}, unix.ENOENT
	case rest2 != "":
		return Target{}, unix.ENOTDIR
	}
	fd, err := strconv.Atoi(num)
	if err != nil {
		return Target{}, unix.ENOENT
	}
	abs := base + "/fdinfo/" + num
	if fd < e.Opt.VirtualFDs {
		return procHost(abs, abs[len("/proc/"):]), 0 // the host's, of the guest's host fd
	}
	p := e.procOf(tgid)
	if p == nil {
		return Target{}, unix.ENOENT
	}
	ent, found := p.FDs.Get(fd)
	if !found {
		return Target{}, unix.ENOENT
	}
	return procTarget(abs, &procNode{kind: procText, like: hbase + "/fdinfo", text: func() []byte { return e.fdinfoText(ent) }}), 0
}

// fdList makes the entries of /proc/PID/fd (dt DT_LNK) or fdinfo
// (DT_REG) of guest process tgid: its host fds, then its virtual fds.
func (e *Engine) fdList(tgid int, dt uint8) []fdtable.Dirent {
	ents := []fdtable.Dirent{{Ino: 1, Type: unix.DT_DIR, Name: "."}, {Ino: 1, Type: unix.DT_DIR, Name: ".."}}
	var fds []int
	if names, err := os.ReadDir("/proc/" + strconv.Itoa(tgid) + "/fd"); err == nil {
		for _, n := range names {
			if fd, err := strconv.Atoi(n.Name()); err == nil && fd < e.Opt.VirtualFDs {
				fds = append(fds, fd)
			}
		}
	}
	slices.Sort(fds)
	if p := e.procOf(tgid); p != nil {
		v, _ := p.FDs.Fds()
		fds = append(fds, v...)
	}
	for _, fd := range fds {
		ents = append(ents, fdtable.Dirent{Ino: uint64(fd) + 0x100000, Type: dt, Name: strconv.Itoa(fd)})
	}
	return ents
}

// fdRefOf describes fd of guest process tgid.
func (e *Engine) fdRefOf(tgid, fd int) (*fdRef, unix.Errno) {
	if fd >= e.Opt.VirtualFDs {
		p := e.procOf(tgid)
		if p == nil {
			return nil, unix.ENOENT
		}
		ent, found := p.FDs.Get(fd)
		if !found {
			return nil, unix.ENOENT
		}
		f := ent.File
		switch {
		case f.Listing != nil:
			return &fdRef{text: f.Path, path: f.Path, dir: true, lklfd: -1, acc: unix.O_RDONLY}, 0
		case f.Host:
			return e.hostFdRef(procFd(f.HostFd))
		}
		ref := &fdRef{lklfd: f.LKLFd, acc: f.Flags & unix.O_ACCMODE}
		if st, err := lkl.Fstat(f.LKLFd); err == nil {
			ref.dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
		}
		ref.setLKLPath(e.lklFdPath(f.LKLFd, f.Path))
		return ref, 0
	}
	link := "/proc/" + strconv.Itoa(tgid) + "/fd/" + strconv.Itoa(fd)
	if node := e.Shadows.OfGuestFd(tgid, fd); node != nil {
		ref := &fdRef{lklfd: node.LKLFd(), node: node, host: link, acc: linkAcc(link)}
		ref.setLKLPath(e.lklFdPath(ref.lklfd, node.Path()))
		return ref, 0
	}
	return e.hostFdRef(link)
}

// setLKLPath sets the text and path of an LKL file from its LKL link.
func (ref *fdRef) setLKLPath(p string) {
	ref.text = p
	if !strings.HasSuffix(p, " (deleted)") {
		ref.path = p
	}
}

// linkAcc returns the access mode of the fd behind a host /proc fd link,
// from the link's own mode (Linux gives it r-x, -wx or rwx).
func linkAcc(link string) int {
	var st unix.Stat_t
	if unix.Lstat(link, &st) != nil {
		return unix.O_RDONLY
	}
	switch {
	case st.Mode&0o600 == 0o600:
		return unix.O_RDWR
	case st.Mode&0o200 != 0:
		return unix.O_WRONLY
	}
	return unix.O_RDONLY
}

// hostFdRef describes the host fd whose host /proc link is link.
func (e *Engine) hostFdRef(link string) (*fdRef, unix.Errno) {
	txt, err := os.Readlink(link)
	if err != nil || strings.HasPrefix(txt, freeFdName) {
		// In the in-process tiers a closed guest fd holds the trap
		// tier's placeholder (trap/fds.go): it is not open.
		return nil, unix.ENOENT
	}
	ref := &fdRef{text: txt, lklfd: -1, host: link, acc: linkAcc(link)}
	var st unix.Stat_t
	if unix.Stat(link, &st) == nil {
		ref.dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	const deleted = " (deleted)"
	name, isDeleted := strings.CutSuffix(txt, deleted)
	switch {
	case strings.HasPrefix(txt, "/memfd:kbox:"):
		// A text kbox made for /proc (openText): its path.
		p := strings.TrimPrefix(name, "/memfd:kbox:")
		ref.text, ref.path, ref.made = p, p, true
	case st.Mode&unix.S_IFMT == unix.S_IFIFO && strings.HasPrefix(txt, "/"):
		if p, found := e.FIFOs.PathOf(st.Dev, st.Ino); found {
			ref.text, ref.path = p, p // a FIFO of the image
		} else {
			ref.outside = true
		}
	case !strings.HasPrefix(txt, "/") || strings.HasPrefix(txt, "/memfd:"):
		// A pipe, socket, anonymous inode or memfd of the guest's.
		if st.Mode&unix.S_IFMT == unix.S_IFSOCK && e.notify.has(st.Ino) {
			ref.text = "anon_inode:inotify" // Linux's name (inotify.go)
		}
	default:
		if g, found := e.bindGuestPath(name); found {
			if ref.text = g; isDeleted {
				ref.text += deleted
			} else {
				ref.path = g
			}
		} else if _, found := e.route(name); found {
			if !isDeleted {
				ref.path = name
			}
		} else {
			ref.outside = true
		}
	}
	return ref, 0
}

// lklFdPath returns LKL's link of its fd lklfd (the file's path in the
// image as LKL knows it now), or fallback.
func (e *Engine) lklFdPath(lklfd int, fallback string) string {
	if lklfd < 0 || !e.Opt.HasKernelProc {
		return fallback
	}
	buf := make([]byte, PathMax)
	n, le := e.kprocPath(lkl.SysReadlinkat, 1, "self/fd/"+strconv.Itoa(lklfd), [6]uintptr{0, 0, uptr(buf), uintptr(len(buf))})
	if le != 0 || n == 0 {
		return fallback
	}
	return string(buf[:n])
}

// followFd is where following the link of ref leads: a guest path, or
// what the fd is (procObj).
func (e *Engine) followFd(r *Request, ref *fdRef) (Target, unix.Errno) {
	if ref.lklfd < 0 && ref.path != "" {
		return e.classifyN(r, ref.path, 1)
	}
	p := ref.path
	if p == "" {
		p = ref.text
	}
	t := procTarget(p, &procNode{kind: procObj, fd: ref})
	if ref.path != "" && e.Opt.Policy != nil && e.Opt.Policy.paths {
		// The fd's file by its path now (policy.go).
		if en := e.policyPath(r, &t); en != 0 {
			return Target{}, en
		}
	}
	return t, 0
}

// statFd stats what ref is.
func (e *Engine) statFd(r *Request, ref *fdRef, st *unix.Stat_t) unix.Errno {
	var lst lkl.Stat64
	switch {
	case ref.node != nil:
		if err := e.Shadows.Stat(ref.node, &lst); err != nil {
			return errnoOf(err)
		}
	case ref.lklfd >= 0:
		s, err := lkl.Fstat(ref.lklfd)
		if err != nil {
			return errnoOf(err)
		}
		lst = s
	case ref.host != "":
		return errnoOf(unix.Stat(ref.host, st))
	default:
		return unix.ENOENT
	}
	lst.ToHost(st)
	return 0
}

// accWithin reports whether an open with flags asks for no access that
// an fd of access mode acc lacks.
func accWithin(flags, acc int) bool {
	if flags&unix.O_PATH != 0 {
		return true
	}
	switch flags & unix.O_ACCMODE {
	case unix.O_RDONLY:
		return acc != unix.O_WRONLY && (flags&unix.O_TRUNC == 0 || acc == unix.O_RDWR)
	case unix.O_WRONLY:
		return acc != unix.O_RDONLY
	}
	return acc == unix.O_RDWR
}

// reopenFd serves an open through an fd link: a new description of what
// the fd is, with the caller's flags.
func (e *Engine) reopenFd(r *Request, ref *fdRef, flags int, mode uint32) Result {
	if ref.lklfd >= 0 {
		p := ref.path
		if p == "" {
			p = strings.TrimSuffix(ref.text, " (deleted)")
		}
		if !e.Opt.HasKernelProc {
			t, en := e.classifyN(r, p, 1)
			if en != 0 {
				return errno(en, LKL)
			}
			return e.openTarget(r, t, flags, mode)
		}
		// The same inode again, through LKL's magic link, with the
		// caller's credentials and flags (O_CREAT and O_EXCL mean
		// nothing for a file that exists).
		e.stats.changed()
		lflags, probe := lklOpenFlags(flags &^ (unix.O_CREAT | unix.O_EXCL))
		fd, le := e.lklOpenAt(r, uintptr(e.Opt.KernelProc), "self/fd/"+strconv.Itoa(ref.lklfd), lflags, 0, flags)
		if le != 0 {
			return errno(le, LKL)
		}
		return e.openLKL(r, int(fd), p, flags, probe)
	}
	if ref.host == "" {
		return errno(unix.ENOENT, Emulated)
	}
	if ref.outside && (ref.dir || !accWithin(flags, ref.acc)) {
		return errno(unix.EACCES, Denied)
	}
	// The guest's own object, opened again by kbox through the host's
	// link: never blocking (a FIFO or pipe without the other end would
	// hold kbox's serving thread), the guest's O_NONBLOCK put back after.
	hflags := flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC) | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if flags&unix.O_PATH != 0 {
		hflags = unix.O_PATH | unix.O_CLOEXEC | flags&unix.O_DIRECTORY
	}
	hfd, err := unix.Open(ref.host, hflags, 0)
	if err != nil {
		return fail(err, Host)
	}
	if flags&unix.O_PATH != 0 {
		return hostPathFd(r, hfd, flags&unix.O_CLOEXEC != 0)
	}
	defer unix.Close(hfd)
	if flags&unix.O_NONBLOCK == 0 {
		if fl, err := unix.FcntlInt(uintptr(hfd), unix.F_GETFL, 0); err == nil {
			unix.FcntlInt(uintptr(hfd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
		}
	}
	gfd, err := r.G.AddFDReply(hfd, flags&unix.O_CLOEXEC != 0)
	if err != nil {
		return fail(err, Host)
	}
	return answered(int64(gfd), Host)
}

// fdinfoText makes /proc/PID/fdinfo/N of a virtual fd: LKL's (or, for a
// host file, the host's) fdinfo of kbox's file, with the flags the guest
// sees.
func (e *Engine) fdinfoText(ent fdtable.Entry) []byte {
	f := ent.File
	var b []byte
	var flags int
	switch {
	case f.Listing != nil:
		b = []byte(fmt.Sprintf("pos:\t%d\nflags:\t0\nmnt_id:\t0\nino:\t0\n", f.Listing.Pos()))
		flags = f.Flags
	case f.Host:
		b, _ = os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(f.HostFd))
		if fl, err := unix.FcntlInt(uintptr(f.HostFd), unix.F_GETFL, 0); err == nil {
			flags = fl
		}
	default:
		if e.Opt.HasKernelProc {
			b, _ = lkl.ReadFileAt(e.Opt.KernelProc, "self/fdinfo/"+strconv.Itoa(f.LKLFd))
		}
		flags = getfl(f.LKLFd, f.Flags)
	}
	flags &^= unix.O_CLOEXEC
	if ent.Cloexec {
		flags |= unix.O_CLOEXEC
	}
	return fdinfoFlags(b, flags)
}

// fdinfoFlags puts flags into an fdinfo text's "flags:" line (adding one
// if it has none).
func fdinfoFlags(b []byte, flags int) []byte {
	line := fmt.Sprintf("flags:\t0%o", flags)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "flags:") {
			lines[i] = line
			return []byte(strings.Join(lines, "\n"))
		}
	}
	return []byte(line + "\n" + string(b))
}
