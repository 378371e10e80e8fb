package dispatch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The links of /proc/PID/fd as the engine knows them (procfs.FdRef: package
// procfs lists the fds and classifies the paths; what each fd is, and
// following its link, is the engine's). A link reads as the guest path of its file, or as the kernel's name of
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

// fdRefOf describes fd of guest process tgid.
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
		f := ent.File
		switch {
		case f.Listing != nil:
			return &procfs.FdRef{Text: f.Path, Path: f.Path, Dir: true, LKLFd: -1, Acc: unix.O_RDONLY}, 0
		case f.Host:
			if _, is := f.Node.(procLinkFile); is {
				return procLinkRef(f.Path, f.HostFd), 0
			}
			return e.hostFdRef(guestpath.ProcFd(f.HostFd))
		}
		ref := &procfs.FdRef{LKLFd: f.LKLFd, Acc: f.Flags & unix.O_ACCMODE}
		if st, err := lkl.Fstat(f.LKLFd); err == nil {
			ref.Dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
		}
		setLKLPath(ref, e.lklFdPath(f.LKLFd, f.Path))
		return ref, 0
	}
	if e.hostFdHidden(tgid, fd) {
		return nil, unix.ENOENT
	}
	link := "/proc/" + strconv.Itoa(tgid) + "/fd/" + strconv.Itoa(fd)
	if node := e.Shadows.OfGuestFd(tgid, fd); node != nil {
		ref := &procfs.FdRef{LKLFd: node.LKLFd(), Node: node, Host: link, Acc: linkAcc(link)}
		setLKLPath(ref, e.lklFdPath(ref.LKLFd, node.Path()))
		return ref, 0
	}
	return e.hostFdRef(link)
}

// hostFdHidden reports that host fd of guest process tgid is none of the
// guest's (GuestFdOpen): only in the in-process tiers, whose guest is
// kbox's own process.
func (e *Engine) hostFdHidden(tgid, fd int) bool {
	return e.GuestFdOpen != nil && tgid == os.Getpid() && !e.GuestFdOpen(fd)
}

// setLKLPath sets the text and path of an LKL file from its LKL link.
func setLKLPath(ref *procfs.FdRef, p string) {
	ref.Text = p
	if !strings.HasSuffix(p, " (deleted)") {
		ref.Path = p
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
func (e *Engine) hostFdRef(link string) (*procfs.FdRef, unix.Errno) {
	txt, err := os.Readlink(link)
	if err != nil || strings.HasPrefix(txt, freeFdName) {
		// In the in-process tiers a closed guest fd holds the trap
		// tier's placeholder (trap/fds.go): it is not open.
		return nil, unix.ENOENT
	}
	ref := &procfs.FdRef{Text: txt, LKLFd: -1, Host: link, Acc: linkAcc(link)}
	var st unix.Stat_t
	if unix.Stat(link, &st) == nil {
		ref.Dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	const deleted = " (deleted)"
	name, isDeleted := strings.CutSuffix(txt, deleted)
	switch {
	case strings.HasPrefix(txt, "/memfd:kbox:"):
		// A text kbox made for /proc (openText): its path.
		p := strings.TrimPrefix(name, "/memfd:kbox:")
		ref.Text, ref.Path, ref.Made = p, p, true
	case st.Mode&unix.S_IFMT == unix.S_IFIFO && strings.HasPrefix(txt, "/"):
		if p, found := e.FIFOs.PathOf(st.Dev, st.Ino); found {
			ref.Text, ref.Path = p, p // a FIFO of the image
		} else {
			ref.Outside = true
		}
	case !strings.HasPrefix(txt, "/") || strings.HasPrefix(txt, "/memfd:"):
		// A pipe, socket, anonymous inode or memfd of the guest's.
		if st.Mode&unix.S_IFMT == unix.S_IFSOCK && e.notify.has(st.Ino) {
			ref.Text = "anon_inode:inotify" // Linux's name (sys_file_inotify.go)
		}
	default:
		if g, found := e.bindGuestPath(name); found {
			if ref.Text = g; isDeleted {
				ref.Text += deleted
			} else {
				ref.Path = g
			}
		} else if _, found := e.route(name); found {
			if !isDeleted {
				ref.Path = name
			}
		} else {
			ref.Outside = true
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

// statFd stats what ref is.
func (e *Engine) statFd(r *Request, ref *procfs.FdRef, st *unix.Stat_t) unix.Errno {
	var lst lkl.Stat64
	switch {
	case ref.Node != nil:
		if err := e.Shadows.Stat(ref.Node, &lst); err != nil {
			return sysabi.Errno(err)
		}
	case ref.LKLFd >= 0:
		s, err := lkl.Fstat(ref.LKLFd)
		if err != nil {
			return sysabi.Errno(err)
		}
		lst = s
	case ref.Host != "":
		return sysabi.Errno(unix.Stat(ref.Host, st))
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
func (e *Engine) reopenFd(r *Request, ref *procfs.FdRef, flags int, mode uint32) Result {
	if ref.LKLFd >= 0 {
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
		// The same inode again, through LKL's magic link, with the
		// caller's credentials and flags (O_CREAT and O_EXCL mean
		// nothing for a file that exists).
		e.stats.Changed()
		lflags, probe := lklOpenFlags(flags &^ (unix.O_CREAT | unix.O_EXCL))
		fd, le := e.lklOpenAt(r, uintptr(e.Opt.KernelProc), "self/fd/"+strconv.Itoa(ref.LKLFd), lflags, 0, flags)
		if le != 0 {
			return errno(le, LKL)
		}
		return e.openLKL(r, int(fd), p, flags, probe)
	}
	if ref.Host == "" {
		return errno(unix.ENOENT, Emulated)
	}
	if ref.Outside && (ref.Dir || !accWithin(flags, ref.Acc)) {
		return errno(unix.EACCES, Denied)
	}
	// The guest's own object, opened again by kbox through the host's
	// link: never blocking (a FIFO or pipe without the other end would
	// hold kbox's serving thread), the guest's O_NONBLOCK put back after.
	hflags := flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC) | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if flags&unix.O_PATH != 0 {
		hflags = unix.O_PATH | unix.O_CLOEXEC | flags&unix.O_DIRECTORY
	}
	hfd, err := unix.Open(ref.Host, hflags, 0)
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
	return procfs.FdinfoFlags(b, flags)
}
