package procfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/hostdev"
	"github.com/kbox-project/kbox/hostproc"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/shadowfd"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The links of /proc/PID/fd (FdRef). The engine makes the FdRef of an fd
// (System.FdRef) with what this file says of host files. A link reads as
// the guest path of its file, or as the kernel's name of an object that
// has none ("pipe:[123]"):
//   - a virtual fd or a shadow: LKL's own link of the LKL file, which is
//     the file's current path in the image (renames followed, " (deleted)"
//     once it has no name), as Linux shows it;
//   - a host file in a bind: its guest path; on a host route: its path; a
//     text kbox made for /proc (a memfd named "kbox:PATH", TextFd): PATH;
//     a FIFO of the image: the path it was first opened by;
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
// the guest's fd (it is the guest's own, ReopenHost). A host file outside
// binds and routes can only be reopened as a non-directory with an access
// mode the fd already has.

// FreeFdName is the link text of the in-process tiers' placeholder of a
// free guest fd number (trap/fds.go's memfd "kbox:free-fd").
const FreeFdName = "/memfd:kbox:free-fd"

// SetLKLPath sets the text and path of an LKL file from its LKL link p.
func (ref *FdRef) SetLKLPath(p string) {
	ref.Text = p
	if !strings.HasSuffix(p, " (deleted)") {
		ref.Path = p
	}
}

// LinkAcc returns the access mode of the fd behind a host /proc fd link,
// from the link's own mode (Linux gives it r-x, -wx or rwx).
func LinkAcc(link string) int {
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

// HostFdRef describes the host fd whose host /proc link is link.
func HostFdRef(s System, link string) (*FdRef, unix.Errno) {
	txt, err := os.Readlink(link)
	if err != nil || strings.HasPrefix(txt, FreeFdName) {
		// In the in-process tiers a closed guest fd holds the trap
		// tier's placeholder (trap/fds.go): it is not open.
		return nil, unix.ENOENT
	}
	ref := &FdRef{Text: txt, LKLFd: -1, Host: link, Acc: LinkAcc(link)}
	var st unix.Stat_t
	if unix.Stat(link, &st) == nil {
		ref.Dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	const deleted = " (deleted)"
	name, isDeleted := strings.CutSuffix(txt, deleted)
	switch {
	case strings.HasPrefix(txt, "/memfd:kbox:"):
		// A text kbox made for /proc (TextFd): its path.
		p := strings.TrimPrefix(name, "/memfd:kbox:")
		ref.Text, ref.Path, ref.Made = p, p, true
	case st.Mode&unix.S_IFMT == unix.S_IFIFO && strings.HasPrefix(txt, "/"):
		if p, found := s.FIFOPath(st.Dev, st.Ino); found {
			ref.Text, ref.Path = p, p // a FIFO of the image
		} else {
			ref.Outside = true
		}
	case !strings.HasPrefix(txt, "/") || strings.HasPrefix(txt, "/memfd:"):
		// A pipe, socket, anonymous inode or memfd of the guest's.
		if st.Mode&unix.S_IFMT == unix.S_IFSOCK && s.Inotify(st.Ino) {
			ref.Text = "anon_inode:inotify" // Linux's name
		}
	default:
		if g, found := s.BindPath(name); found {
			if ref.Text = g; isDeleted {
				ref.Text += deleted
			} else {
				ref.Path = g
			}
		} else if g, found := s.PtsPath(st.Dev, name); found {
			ref.Text, ref.Path = g, g // a pty (deleted only with its instance)
		} else if s.OnRoute(name) {
			if !isDeleted {
				ref.Path = name
			}
		} else {
			ref.Outside = true
		}
	}
	return ref, 0
}

// LinkFile marks a virtual fd that is an O_PATH fd of a /proc link
// (fdtable.File.Node; the File's Path is the link's guest path). Linux
// opens a symbolic link itself for open(O_PATH|O_NOFOLLOW): the fd stats
// as the link, readlinkat(fd, "") reads it, and its own /proc/PID/fd link
// leads to the link, which open refuses (ELOOP) and mount too (ENOENT).
// kbox's links are nodes with no file of their own: the guest's fd holds
// an O_PATH fd of the host link the node stands for (LinkStandIn), and
// readlinkat reads the node again.
type LinkFile struct{}

// VirtualFdRef describes virtual fd f (cfg the engine's facts): a generated directory, an O_PATH
// fd of a /proc link (it reads as the link's path and leads to the link:
// kbox's host O_PATH fd of its stand-in), a host file, or an LKL file by
// LKL's link of it.
func VirtualFdRef(s System, cfg Config, f *fdtable.File) (*FdRef, unix.Errno) {
	switch {
	case f.Listing != nil:
		return &FdRef{Text: f.Path, Path: f.Path, Dir: true, LKLFd: -1, Acc: unix.O_RDONLY}, 0
	case f.Host && f.Node == LinkFile{}:
		return &FdRef{Text: f.Path, LKLFd: -1, Host: selfFd(f.HostFd), Acc: unix.O_RDONLY, Symlink: true}, 0
	case f.Host:
		return HostFdRef(s, selfFd(f.HostFd))
	}
	ref := &FdRef{LKLFd: f.LKLFd, Acc: f.Flags & unix.O_ACCMODE}
	if st, err := lkl.Fstat(f.LKLFd); err == nil {
		ref.Dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	ref.SetLKLPath(LKLFdPath(cfg, f.LKLFd, f.Path))
	return ref, 0
}

// GuestFdRef describes host fd fd of guest process tgid (not hidden):
// node is its shadow, if it has one (an image file's, by LKL's link of
// it).
func GuestFdRef(s System, cfg Config, tgid, fd int, node *shadowfd.Node) (*FdRef, unix.Errno) {
	link := "/proc/" + strconv.Itoa(tgid) + "/fd/" + strconv.Itoa(fd)
	if node != nil {
		ref := &FdRef{LKLFd: node.LKLFd(), Node: node, Host: link, Acc: LinkAcc(link)}
		ref.SetLKLPath(LKLFdPath(cfg, ref.LKLFd, node.Path()))
		return ref, 0
	}
	return HostFdRef(s, link)
}

// StatFd stats what ref is (a shadow's through shadows).
func StatFd(ref *FdRef, shadows *shadowfd.Manager, st *unix.Stat_t) unix.Errno {
	var lst lkl.Stat64
	switch {
	case ref.Node != nil:
		if err := shadows.Stat(ref.Node, &lst); err != nil {
			return sysabi.Errno(err)
		}
	case ref.LKLFd >= 0:
		s, err := lkl.Fstat(ref.LKLFd)
		if err != nil {
			return sysabi.Errno(err)
		}
		lst = s
	case ref.Host != "":
		if err := unix.Stat(ref.Host, st); err != nil {
			return sysabi.Errno(err)
		}
		hostdev.Stat(st)
		return 0
	default:
		return unix.ENOENT
	}
	lst.ToHost(st)
	return 0
}

// AccWithin reports whether an open with flags asks for no access that
// an fd of access mode acc lacks.
func AccWithin(flags, acc int) bool {
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

// ReopenHost opens again, with the guest's flags, what ref (no LKL file)
// is: the guest's own object, through the host's link. denied says the
// guest may not (a host file outside binds and routes, as a directory or
// with access the fd lacks). The open never blocks (a FIFO or pipe
// without the other end would hold kbox's serving thread); the guest's
// O_NONBLOCK is put back after.
func ReopenHost(ref *FdRef, flags int) (hfd int, en unix.Errno, denied bool) {
	if ref.Host == "" {
		return -1, unix.ENOENT, false
	}
	if ref.Outside && (ref.Dir || !AccWithin(flags, ref.Acc)) {
		return -1, unix.EACCES, true
	}
	hflags := flags&^(unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC) | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if flags&unix.O_PATH != 0 {
		hflags = unix.O_PATH | unix.O_CLOEXEC | flags&unix.O_DIRECTORY
	}
	hfd, err := unix.Open(ref.Host, hflags, 0)
	if err != nil {
		return -1, sysabi.Errno(err), false
	}
	if flags&(unix.O_NONBLOCK|unix.O_PATH) == 0 {
		if fl, err := unix.FcntlInt(uintptr(hfd), unix.F_GETFL, 0); err == nil {
			unix.FcntlInt(uintptr(hfd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
		}
	}
	return hfd, 0, false
}

// VirtualFdinfo makes /proc/PID/fdinfo/N of a virtual fd: LKL's (or, for
// a host file, the host's) fdinfo of kbox's file, with the flags the
// guest sees; getfl gives an LKL file's (from its LKL fd and open flags).
func VirtualFdinfo(cfg Config, ent fdtable.Entry, getfl func(lfd, flags int) int) []byte {
	f := ent.File
	var b []byte
	var flags int
	switch {
	case f.Listing != nil:
		b = []byte(fmt.Sprintf("pos:\t%d\nflags:\t0\nmnt_id:\t0\nino:\t0\n", f.Listing.Pos()))
		flags = f.Flags
	case f.Host:
		b, _ = hostproc.Read("/proc/self/fdinfo/" + strconv.Itoa(f.HostFd))
		if fl, err := unix.FcntlInt(uintptr(f.HostFd), unix.F_GETFL, 0); err == nil {
			flags = fl
		}
	default:
		if cfg.HasKernelProc {
			b, _ = lkl.ReadFileAt(cfg.KernelProc, "self/fdinfo/"+strconv.Itoa(f.LKLFd))
		}
		flags = getfl(f.LKLFd, f.Flags)
	}
	flags &^= unix.O_CLOEXEC
	if ent.Cloexec {
		flags |= unix.O_CLOEXEC
	}
	return FdinfoFlags(b, flags)
}
