// The meta family's extended attributes (FamMeta in table.go).

package dispatch

import (
	"bytes"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/fdtable"
	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/procfs"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The xattr family: getxattr, setxattr, listxattr and removexattr, each
// by path, by path without following the last link (l*) and by fd (f*).
// Where the call goes depends on the file (xattrObj):
//   - a file in LKL (the image, /tmp, the guest's /dev), by path or by an
//     fd of it (a virtual fd, or a shadow: its LKL file, never the memfd;
//     an internet socket: LKL's socket):
//     LKL's own call, made with the caller's credentials (cred.go), so
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
		known, done, learn := e.xattrGetFromFacts(r, &c, &o)
		if done {
			return errno(known, LKL)
		}
		xb := xattrBufs.Get().(*xattrBuf)
		defer xattrBufs.Put(xb)
		n, buf, en = lklXattr(&c, &o, xb)
		e.learnFromAnswer(learn, en)
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

// xattrBuf holds an LKL call's name and, up to a page, its value or list:
// pooled, so that the common calls (ls -l asks two names of every file,
// mostly absent) allocate nothing. LKL writes it: heap memory.
type xattrBuf struct {
	name [xattrNameMax + 1]byte
	val  [4096]byte
}

var xattrBufs = sync.Pool{New: func() any { return new(xattrBuf) }}

// lklXattr runs the call on a file in LKL; for get and list it returns
// the buffer LKL filled (xb's or a larger one), valid until xb goes back.
func lklXattr(c *xattrCall, o *xattrObj, xb *xattrBuf) (int, []byte, unix.Errno) {
	var buf, name []byte
	if (c.op == xattrGet || c.op == xattrList) && c.size > 0 {
		if c.size <= uint64(len(xb.val)) {
			buf = xb.val[:c.size]
		} else {
			buf = make([]byte, c.size)
		}
	}
	if c.op != xattrList {
		n := copy(xb.name[:xattrNameMax], c.name) // readXattrCall bounds it
		xb.name[n] = 0
		name = xb.name[:n+1]
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
	p, en := readPath(r, r.Args[0])
	var t guestpath.Target
	if en == 0 {
		en = e.resolveInto(r, unix.AT_FDCWD, p, &t)
	}
	switch {
	case en != 0:
	case nofollow:
		if t.Fd != 0 {
			t, en = e.procFdLink(r, t) // /dev/fd/N: the link /proc/self/fd/N
		}
	case t.Fd > 0:
		return e.xattrFdObj(r, t.Fd-1, true) // the file fd N is
	case t.FdDir:
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

// Extended attributes of what is not in LKL: binds and the guest's host
// objects (user.* only), and files without any (noXattr).

// capSetfcap is CAP_SETFCAP's bit.
const capSetfcap = 31

// userPrefix is the one namespace a host file shows the guest.
const userPrefix = "user."

// hostName reports a name that goes to a host file: user.*, and a
// socket's protocol name (sockfs's system.sockprotoname, read-only).
func hostName(name []byte) bool {
	return bytes.HasPrefix(name, []byte(userPrefix)) || string(name) == sockProtoName
}

const sockProtoName = "system.sockprotoname"

// xattrFdObj is the file of guest fd fd: for an f* call, or (viaPath) for
// a path through /dev/fd/N, which reaches an O_PATH fd's file too and
// finds a closed fd missing (ENOENT).
func (e *Engine) xattrFdObj(r *Request, fd int, viaPath bool) (xattrObj, unix.Errno) {
	bad := unix.EBADF
	if viaPath {
		bad = unix.ENOENT
	}
	if fd < 0 {
		return xattrObj{}, bad
	}
	if r.P.FDs.IsVirtual(fd) {
		ent, found := r.P.FDs.Get(fd)
		if !found {
			return xattrObj{}, bad
		}
		if !viaPath && pathOnly(ent.File) {
			return xattrObj{}, unix.EBADF
		}
	}
	ref, en := e.fdRefOf(r.P.Tgid, fd)
	if en != 0 {
		return xattrObj{}, bad
	}
	return e.xattrRefObj(r, ref)
}

// usableFd reports whether virtual fd fd is open for more than O_PATH
// (an O_PATH fd serves only path-level calls: others are EBADF).
func usableFd(r *Request, fd uint64) bool {
	ent, ok := r.P.FDs.Get(int(int32(fd)))
	return ok && !pathOnly(ent.File)
}

// pathOnly reports an O_PATH file of the virtual table: an image file's,
// or a host file's (an O_PATH open in a bind or on a host route).
func pathOnly(f *fdtable.File) bool {
	if f.Flags&unix.O_PATH != 0 {
		return true
	}
	if f.Host {
		fl, err := unix.FcntlInt(uintptr(f.HostFd), unix.F_GETFL, 0)
		return err == nil && fl&unix.O_PATH != 0
	}
	return false
}

// xattrRefObj is the file a guest fd (as /proc describes it) is.
func (e *Engine) xattrRefObj(r *Request, ref *procfs.FdRef) (xattrObj, unix.Errno) {
	var st unix.Stat_t
	switch {
	case ref.LKLFd >= 0 && lklPathOnly(ref.LKLFd):
		// An O_PATH fd, reached through its /proc link (the f* calls
		// refused it before): LKL's f* calls refuse it too, so its file
		// by the path its link shows, not followed, while that path
		// names it.
		var st lkl.Stat64
		fst, err := lkl.Fstat(ref.LKLFd)
		if err != nil || ref.Path == "" || lklStatUncached(ref.Path, true, &st) != 0 || st.Dev != fst.Dev || st.Ino != fst.Ino {
			return xattrObj{}, unix.ENOENT
		}
		return xattrObj{kind: xattrLKLPath, path: ref.Path, nofollow: true}, 0
	case ref.LKLFd >= 0:
		// A virtual fd of an LKL file, or a shadow: its LKL file.
		return xattrObj{kind: xattrLKLFd, lklfd: ref.LKLFd}, 0
	case ref.Host == "":
		// A directory kbox generates.
		if en := e.statListing(r, ref.Path, &st); en != 0 {
			return xattrObj{}, en
		}
		return e.noneObj(r, &st), 0
	case ref.Made:
		// A text kbox made for /proc: its node's stat (the memfd's
		// mode is not the file's).
		if t, en := e.classify(r, ref.Path); en == 0 && t.Proc != nil && e.procStat(r, t, true, &st) == 0 {
			return e.noneObj(r, &st), 0
		}
		st = unix.Stat_t{Mode: unix.S_IFREG | 0o444}
		return e.noneObj(r, &st), 0
	case ref.Outside:
		if unix.Stat(ref.Host, &st) != nil {
			return xattrObj{}, unix.EBADF
		}
		return e.noneObj(r, &st), 0
	case ref.Path != "":
		t, en := e.classify(r, ref.Path)
		switch {
		case en != 0:
			return xattrObj{}, en
		case !t.Host:
			// A FIFO of the image: its node in LKL.
			return xattrObj{kind: xattrLKLPath, path: t.LKLPath()}, 0
		case t.Bind == nil:
			// A file of a system route.
			if unix.Stat(ref.Host, &st) != nil {
				return xattrObj{}, unix.EBADF
			}
			return e.noneObj(r, &st), 0
		}
		return xattrObj{kind: xattrHost, path: ref.Host, ro: t.Bind.ReadOnly}, 0
	}
	if e.Net != nil && unix.Stat(ref.Host, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
		if s := e.Net.Lookup(st.Ino); s != nil {
			// An internet socket: the guest holds one end of a pair
			// whose other end kbox pumps to LKL's socket (package inet),
			// which is what it is.
			return xattrObj{kind: xattrLKLFd, lklfd: s.LKLFD()}, 0
		}
	}
	// A pipe, unix socket, anonymous inode or memfd of the guest's own,
	// or a file of a bind that lost its name.
	o := xattrObj{kind: xattrHost, path: ref.Host}
	if b := e.bindOf(strings.TrimSuffix(ref.Text, " (deleted)")); b != nil {
		o.ro = b.ReadOnly
	}
	return o, 0
}

// lklPathOnly reports an LKL fd opened with O_PATH.
func lklPathOnly(lklfd int) bool {
	fl, le := lkl.Syscall6(lkl.SysFcntl, uintptr(lklfd), unix.F_GETFL, 0, 0, 0, 0)
	return le == 0 && lkl.OpenFlagsFromLKL(uint32(fl))&unix.O_PATH != 0
}

// xattrProcObj is the file of t, a node of the guest's /proc.
func (e *Engine) xattrProcObj(r *Request, t guestpath.Target, nofollow bool) (xattrObj, unix.Errno) {
	if n := t.Proc; !nofollow && t.Tail == "" && n.Kind == procfs.Link && n.Fd != nil {
		// An fd's link: the very file the fd is (an O_PATH fd of a
		// symlink is the symlink), not its path followed again; the
		// policy still has its say on that path.
		if _, en := e.followFd(r, n.Fd); en != 0 {
			return xattrObj{}, en
		}
		return e.xattrRefObj(r, n.Fd)
	}
	if !nofollow || t.Tail != "" {
		var en unix.Errno
		if t, en = e.followProc(r, t); en != 0 {
			return xattrObj{}, en
		}
		if t.Proc == nil {
			return e.xattrTargetObj(r, t, false)
		}
	}
	if t.Proc.Kind == procfs.Obj {
		return e.xattrRefObj(r, t.Proc.Fd) // what an fd link leads to
	}
	var st unix.Stat_t
	if en := e.procStat(r, t, true, &st); en != 0 {
		return xattrObj{}, en
	}
	o := e.noneObj(r, &st)
	if t.Proc.Kind == procfs.LKL {
		// LKL's own proc: its permission checks (a /proc/sys
		// directory is not writable, even for root).
		o.access = func(m int) unix.Errno { return e.procAccess(r, t, m) }
	}
	return o, 0
}

// noneObj is a file without extended attributes, with stat st.
func (e *Engine) noneObj(r *Request, st *unix.Stat_t) xattrObj {
	c := &r.P.creds().Cred
	s := *st
	return xattrObj{kind: xattrNone, mode: s.Mode, access: func(m int) unix.Errno { return modeAccess(c, &s, m) }}
}

// modeAccess checks c's permission want (R_OK or W_OK) on a file of stat
// st from its mode bits, as Linux's generic_permission without ACLs.
func modeAccess(c *Cred, st *unix.Stat_t, want int) unix.Errno {
	if c.Has(capDacOverride) || want == unix.R_OK && c.Has(capDacReadSearch) {
		return 0
	}
	perm := st.Mode
	switch {
	case st.Uid == c.FSUID:
		perm >>= 6
	case st.Gid == c.FSGID || slices.Contains(c.Groups, st.Gid):
		perm >>= 3
	}
	if perm&uint32(want) == uint32(want) {
		return 0
	}
	return unix.EACCES
}

// noXattr answers a call on a file whose filesystem has no extended
// attributes (procfs, pipefs), or none in the namespace of the call's
// name (a bind's file for all but user.*): the list is empty, and a name
// gets what Linux's VFS checks give before they find no handler for it:
// for user.*, ENODATA (get) or EPERM (change) on anything but a regular
// file or directory, then the caller's permission; for trusted.*,
// ENODATA or EPERM without CAP_SYS_ADMIN; for a change of security.*,
// EPERM without CAP_SYS_ADMIN (removing security.capability:
// CAP_SETFCAP); then EOPNOTSUPP.
func noXattr(c *xattrCall, cr *Cred, mode uint32, access func(int) unix.Errno) unix.Errno {
	if c.op == xattrList {
		return 0
	}
	w := c.writes()
	switch name := c.name; {
	case strings.HasPrefix(name, userPrefix):
		if ft := mode & unix.S_IFMT; ft != unix.S_IFREG && ft != unix.S_IFDIR {
			if w {
				return unix.EPERM
			}
			return unix.ENODATA
		}
		if access != nil {
			want := unix.R_OK
			if w {
				want = unix.W_OK
			}
			if en := access(want); en != 0 {
				return en
			}
		}
	case strings.HasPrefix(name, "trusted."):
		if !cr.Has(capSysAdmin) {
			if w {
				return unix.EPERM
			}
			return unix.ENODATA
		}
	case w && name == "security.capability":
		if c.op == xattrRemove && !cr.Has(capSetfcap) {
			return unix.EPERM
		}
	case w && strings.HasPrefix(name, "security."):
		if !cr.Has(capSysAdmin) {
			return unix.EPERM
		}
	}
	return unix.EOPNOTSUPP
}

// hostXattr runs the call on a host file, reached through path (a /proc
// fd link): user.* (and system.sockprotoname) passes, the other names are
// a filesystem's without them (noXattr).
func hostXattr(c *xattrCall, o *xattrObj, cr *Cred) (int, []byte, unix.Errno) {
	if o.ro && c.writes() {
		return 0, nil, unix.EROFS
	}
	if c.op == xattrList {
		names, en := userNames(o.path)
		if en != 0 {
			return 0, nil, en
		}
		switch n := uint64(len(names)); {
		case c.size == 0:
			return len(names), nil, 0
		case n > c.size && c.size >= xattrListMax:
			return 0, nil, unix.E2BIG
		case n > c.size:
			return 0, nil, unix.ERANGE
		}
		return len(names), names, 0
	}
	if !hostName([]byte(c.name)) {
		return 0, nil, noXattr(c, cr, 0, nil)
	}
	var n int
	var buf []byte
	var err error
	switch c.op {
	case xattrGet:
		buf = make([]byte, c.size)
		n, err = unix.Getxattr(o.path, c.name, buf)
	case xattrSet:
		err = unix.Setxattr(o.path, c.name, c.value, c.flags)
	case xattrRemove:
		err = unix.Removexattr(o.path, c.name)
	}
	return n, buf, sysabi.Errno(err)
}

// userNames returns the names of the host file at path that go to it
// (hostName), each NUL-terminated, in the host's order.
func userNames(path string) ([]byte, unix.Errno) {
	for range 8 {
		n, err := unix.Listxattr(path, nil)
		if err != nil {
			return nil, sysabi.Errno(err)
		}
		all := make([]byte, n)
		n, err = unix.Listxattr(path, all)
		if err == unix.ERANGE {
			continue // the list grew meanwhile
		}
		if err != nil {
			return nil, sysabi.Errno(err)
		}
		var out []byte
		for _, name := range bytes.SplitAfter(all[:n], []byte{0}) {
			if len(name) > 0 && hostName(name[:len(name)-1]) {
				out = append(out, name...)
			}
		}
		return out, 0
	}
	return nil, unix.ERANGE // it keeps growing
}
