// The meta family's extended attributes (FamMeta in table.go).

package dispatch

import (
	"runtime"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The xattr family: getxattr, setxattr, listxattr and removexattr, each
// by path, by path without following the last link (l*) and by fd (f*).
// Where the call goes depends on the file (xattrObj):
//   - a file in LKL (the image, /tmp, the guest's /dev), by path or by an
//     fd of it (a virtual fd, or a shadow: its LKL file, never the memfd;
//     an internet socket: LKL's socket):
//     LKL's own call, made with the caller's credentials (credlkl.go), so
//     LKL's VFS applies Linux's rules itself: user.* on regular files and
//     directories with read or write permission (EPERM to set on others,
//     and on a sticky directory of someone else), trusted.* with
//     CAP_SYS_ADMIN, security.* set with CAP_SYS_ADMIN, POSIX ACLs set by
//     the owner or CAP_FOWNER and honoured by every later permission check
//     (kbox checks opens, access and exec through LKL);
//   - a file of a bind (-b), and objects the guest holds on the host
//     (pipes, unix sockets, its own memfds): user.* (and a socket's
//     system.sockprotoname) goes to the host file, with
//     kbox's host identity as every call in a bind; the other namespaces
//     are answered as by a filesystem that has none (noXattr) and never
//     listed, so the host's security labels, trusted.* and ACLs stay
//     unseen and unchanged;
//   - /proc, the host's CPU topology in /sys, kbox's own /proc texts and
//     generated directories, host files outside binds (a terminal kbox
//     was given): a filesystem without extended attributes, as procfs is
//     (noXattr).
//
// The arguments are checked in Linux's order (6.x): XATTR_CREATE/REPLACE
// flags (EINVAL), the name (EFAULT; ERANGE when empty or longer than 255),
// the value's size (E2BIG above 64 KiB) and memory (EFAULT), then the path
// or fd (an fd that is not open, or is O_PATH, is EBADF).

// Linux's limits and flags (linux/limits.h, linux/xattr.h).
const (
	xattrNameMax = 255
	xattrSizeMax = 65536
	xattrListMax = 65536
	xattrCreate  = 1
	xattrReplace = 2
)

type xattrOp uint8

const (
	xattrGet xattrOp = iota
	xattrSet
	xattrList
	xattrRemove
)

// The forms of each call, in LKL's numbering order.
const (
	formPath = iota // follows the last link
	formLink        // l*: does not
	formFd          // f*
)

// xattrCall is one call, its arguments read from the guest.
type xattrCall struct {
	op    xattrOp
	form  int
	name  string // get, set, remove
	value []byte // set
	// buf and size are the guest's buffer for get and list; size is
	// capped at what Linux copies at most.
	buf, size uint64
	flags     int // set
}

// xattrShape returns the operation and form of syscall nr.
func xattrShape(nr int) (xattrOp, int) {
	switch nr {
	case unix.SYS_GETXATTR:
		return xattrGet, formPath
	case unix.SYS_LGETXATTR:
		return xattrGet, formLink
	case unix.SYS_FGETXATTR:
		return xattrGet, formFd
	case unix.SYS_SETXATTR:
		return xattrSet, formPath
	case unix.SYS_LSETXATTR:
		return xattrSet, formLink
	case unix.SYS_FSETXATTR:
		return xattrSet, formFd
	case unix.SYS_LISTXATTR:
		return xattrList, formPath
	case unix.SYS_LLISTXATTR:
		return xattrList, formLink
	case unix.SYS_FLISTXATTR:
		return xattrList, formFd
	case unix.SYS_REMOVEXATTR:
		return xattrRemove, formPath
	case unix.SYS_LREMOVEXATTR:
		return xattrRemove, formLink
	}
	return xattrRemove, formFd
}

// lklNr is the LKL syscall of the call in form.
func (c *xattrCall) lklNr(form int) uintptr {
	base := [...]uintptr{xattrGet: lkl.SysGetxattr, xattrSet: lkl.SysSetxattr,
		xattrList: lkl.SysListxattr, xattrRemove: lkl.SysRemovexattr}[c.op]
	return base + uintptr(form)
}

// writes reports a call that changes the file.
func (c *xattrCall) writes() bool { return c.op == xattrSet || c.op == xattrRemove }

// readXattrCall reads and checks the arguments of r (all but the path or
// fd) as Linux does before it looks at the file.
func readXattrCall(r *Request) (xattrCall, unix.Errno) {
	var c xattrCall
	c.op, c.form = xattrShape(r.Nr)
	if c.op == xattrList {
		c.buf, c.size = r.Args[1], min(r.Args[2], xattrListMax)
		return c, 0
	}
	if c.op == xattrSet {
		c.flags = int(int32(r.Args[4]))
		if c.flags&^(xattrCreate|xattrReplace) != 0 {
			return c, unix.EINVAL
		}
	}
	name, en := readString(r.G, r.Args[1], xattrNameMax+1)
	switch {
	case en == unix.ENAMETOOLONG:
		return c, unix.ERANGE
	case en != 0:
		return c, en
	case name == "":
		return c, unix.ERANGE
	}
	c.name = name
	switch c.op {
	case xattrGet:
		c.buf, c.size = r.Args[2], min(r.Args[3], xattrSizeMax)
	case xattrSet:
		if r.Args[3] > xattrSizeMax {
			return c, unix.E2BIG
		}
		c.value = make([]byte, r.Args[3])
		if len(c.value) > 0 && r.G.Read(r.Args[2], c.value) != nil {
			return c, unix.EFAULT
		}
	}
	return c, 0
}

// xattrKind is where a call goes.
type xattrKind uint8

const (
	xattrLKLPath xattrKind = iota // path in LKL
	xattrLKLFd                    // lklfd
	xattrHost                     // path reaches the host file (a /proc fd link)
	xattrNone                     // a file without extended attributes
)

// xattrObj is the file a call is for.
type xattrObj struct {
	kind     xattrKind
	path     string
	nofollow bool // xattrLKLPath: the l* form
	lklfd    int
	// ro: a file of a read-only bind (EROFS for a change).
	ro bool
	// owned: path is kbox's O_PATH fd hostFd, closed after the call.
	owned  bool
	hostFd int
	// mode is an xattrNone file's type and permission bits, and access
	// checks the caller's read (R_OK) or write (W_OK) permission on it.
	mode   uint32
	access func(mode int) unix.Errno
}

// disp is where a call on o was served.
func (o *xattrObj) disp() Disposition {
	switch o.kind {
	case xattrHost:
		return Host
	case xattrNone:
		return Emulated
	}
	return LKL
}

func (o *xattrObj) close() {
	if o.owned {
		unix.Close(o.hostFd)
	}
}

// sysXattr serves the xattr family.
func sysXattr(e *Engine, r *Request) Result {
	c, en := readXattrCall(r)
	if en != 0 {
		return errno(en, Emulated)
	}
	var o xattrObj
	if c.form == formFd {
		o, en = e.xattrFdObj(r, int(int32(r.Args[0])), false)
	} else {
		o, en = e.xattrPathObj(r, c.form == formLink)
	}
	if en != 0 {
		return errno(en, LKL)
	}
	defer o.close()
	var n int
	var buf []byte
	switch o.kind {
	case xattrLKLPath, xattrLKLFd:
		n, buf, en = lklXattr(&c, &o)
	case xattrHost:
		n, buf, en = hostXattr(&c, &o, &r.P.creds().Cred)
	default:
		en = noXattr(&c, &r.P.creds().Cred, o.mode, o.access)
	}
	if en != 0 {
		return errno(en, o.disp())
	}
	if c.size > 0 && n > 0 && buf != nil {
		if err := r.G.Write(c.buf, buf[:n]); err != nil {
			return errno(unix.EFAULT, o.disp())
		}
	}
	return ok(int64(n), o.disp())
}

// lklXattr runs the call on a file in LKL; for get and list it returns
// the buffer LKL filled.
func lklXattr(c *xattrCall, o *xattrObj) (int, []byte, unix.Errno) {
	var buf, name []byte
	if (c.op == xattrGet || c.op == xattrList) && c.size > 0 {
		buf = make([]byte, c.size)
	}
	if c.op != xattrList {
		name = cpath(c.name)
	}
	var a [6]uintptr
	switch c.op {
	case xattrGet:
		a = [6]uintptr{0, uptr(name), uptr(buf), uintptr(len(buf))}
	case xattrSet:
		a = [6]uintptr{0, uptr(name), uptr(c.value), uintptr(len(c.value)), uintptr(c.flags)}
	case xattrList:
		a = [6]uintptr{0, uptr(buf), uintptr(len(buf))}
	case xattrRemove:
		a = [6]uintptr{0, uptr(name)}
	}
	var n uintptr
	var le unix.Errno
	if o.kind == xattrLKLFd {
		n, le = lkl.Syscall6(c.lklNr(formFd), uintptr(o.lklfd), a[1], a[2], a[3], a[4], 0)
	} else {
		form := formPath
		if o.nofollow {
			form = formLink
		}
		n, le = lklPath(c.lklNr(form), 0, o.path, a)
	}
	runtime.KeepAlive(name)
	runtime.KeepAlive(buf)
	runtime.KeepAlive(c.value)
	return int(n), buf, le
}

// xattrPathObj resolves the path argument of a path or l* call.
func (e *Engine) xattrPathObj(r *Request, nofollow bool) (xattrObj, unix.Errno) {
	t, en := e.target(r, unix.AT_FDCWD, r.Args[0])
	switch {
	case en != 0:
	case nofollow:
		t, en = e.procFdLink(r, t) // /dev/fd/N: the link /proc/self/fd/N
	case t.Fd > 0:
		return e.xattrFdObj(r, t.Fd-1, true) // the file fd N is
	default:
		t, en = e.followDev(r, t)
	}
	if en != 0 {
		return xattrObj{}, en
	}
	return e.xattrTargetObj(r, t, nofollow)
}

// xattrTargetObj is the file of resolved target t (its last link not
// followed when nofollow).
func (e *Engine) xattrTargetObj(r *Request, t guestpath.Target, nofollow bool) (xattrObj, unix.Errno) {
	if t.Proc != nil {
		return e.xattrProcObj(r, t, nofollow)
	}
	if !t.Host {
		return xattrObj{kind: xattrLKLPath, path: t.LKLPath(), nofollow: nofollow}, 0
	}
	flags := unix.O_PATH
	if nofollow {
		flags |= unix.O_NOFOLLOW
	}
	if t.Bind == nil {
		// A system route: the host's files there hold nothing for the
		// guest.
		var st unix.Stat_t
		sflags := 0
		if nofollow {
			sflags = unix.AT_SYMLINK_NOFOLLOW
		}
		err := guestpath.At(t, nofollow, func(d int, name string, empty int) error { return unix.Fstatat(d, name, &st, sflags|empty) })
		if err != nil {
			return xattrObj{}, sysabi.Errno(err)
		}
		return e.noneObj(r, &st), 0
	}
	fd, err := t.Bind.OpenIn(t.Rel, flags, 0)
	if err != nil {
		return xattrObj{}, sysabi.Errno(err)
	}
	return xattrObj{kind: xattrHost, path: guestpath.ProcFd(fd), owned: true, hostFd: fd, ro: t.Bind.ReadOnly}, 0
}
