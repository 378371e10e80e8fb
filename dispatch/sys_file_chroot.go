package dispatch

import (
	"cmp"
	"path"
	"runtime"
	"strings"

	"github.com/kbox-project/kbox/guestpath"
	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/policy"
	"golang.org/x/sys/unix"
)

// A guest process's root (chroot(2)) is an image path kept in its Proc,
// nil for the image's root: a process that never chroots resolves its
// paths as before, at the cost of one atomic load. A chrooted process's
// paths are walked here, component by component through LKL's readlink:
// an absolute path or symlink target starts at its root, ".." at its root
// stays there, and the result is the image path that the handlers use as
// they use any. Its cwd, like every stored path, stays an image path;
// getcwd shows it relative to the root ("(unreachable)" before a cwd
// outside it, as Linux does). A bind's links are read in the bind (which
// confines its own lookups); past a system route (/proc) the walk stops
// reading links.

// capSysChroot is CAP_SYS_CHROOT's bit.
const capSysChroot = 18

// chroot returns p's root, "" for the image's root.
func (p *Proc) chroot() string {
	if p == nil {
		return ""
	}
	if rp := p.root.Load(); rp != nil {
		return *rp
	}
	return ""
}

// Root returns the image path of p's root directory ("/" unless it
// chrooted): /proc/PID/root.
func (p *Proc) Root() string {
	if r := p.chroot(); r != "" {
		return r
	}
	return "/"
}

// setRoot makes root (a clean image path) p's root.
func (p *Proc) setRoot(root string) {
	if root == "/" {
		p.root.Store(nil)
		return
	}
	p.root.Store(&root)
}

// viewOf returns image path img as the process with root sees it, and
// whether it is under that root.
func viewOf(root, img string) (string, bool) {
	switch {
	case root == "" || root == "/":
		return img, true
	case img == root:
		return "/", true
	case guestpath.Under(img, root):
		return img[len(root):], true
	}
	return img, false
}

// GuestCwd is getcwd's answer for p: its cwd relative to its root, or
// "(unreachable)" and its image path when the cwd is outside the root.
func (p *Proc) GuestCwd() string {
	cwd := p.Cwd()
	v, in := viewOf(p.chroot(), cwd)
	if !in {
		return "(unreachable)" + cwd
	}
	return v
}

// resolveRooted resolves path p of a chrooted process against dirfd
// (AT_FDCWD or a virtual image fd) inside root; handled is false for a
// host dirfd, which resolveAt confines to its bind or route.
func (e *Engine) resolveRooted(r *Request, root string, dirfd int32, p string) (abs string, en unix.Errno, handled bool) {
	start := root
	switch {
	case strings.HasPrefix(p, "/"):
	case dirfd == unix.AT_FDCWD:
		start = r.P.Cwd()
	case r.P.FDs.IsVirtual(int(dirfd)) && !isHostFile(r, dirfd):
		ent, ok := r.P.FDs.Get(int(dirfd))
		if !ok {
			return "", unix.EBADF, true
		}
		start = ent.File.Path
	default:
		return "", 0, false
	}
	// The final link is followed here when the call follows it: LKL
	// would follow an absolute target from the image's root.
	abs, en = e.walkIn(nil, root, start, p, p == r.Path && followsLink(r))
	return abs, en, true
}

// followIn resolves image path img, final symlink included, inside root
// (for the calls that always follow: chdir, chroot, exec). A path outside the root (under a cwd left outside it) is
// walked from the image's root.
func (e *Engine) followIn(root, img string) (string, unix.Errno) {
	if v, in := viewOf(root, img); in {
		return e.walkIn(nil, root, root, v, true)
	}
	return e.walkIn(nil, root, "/", strings.TrimPrefix(img, "/"), true)
}

// maxLinks is the number of symlinks a lookup follows before ELOOP
// (Linux's MAXSYMLINKS).
const maxLinks = 40

// walkIn resolves p from directory start (an image path; p absolute
// starts at root), reading the symlinks of every component but the last
// (the last too when follow, or when p ends in "/") through LKL: an
// absolute target restarts at root, ".." goes up from the directory
// reached (at root it stays at root). A component that cannot be read
// gives its errno (ENOENT, ENOTDIR, EACCES), as the lookup would, and a
// name ".." leaves must be a directory the caller may search. From a
// bind or a host route on, the rest is taken lexically: those confine
// their own paths. A bind's links are read on the host, confined to the
// bind. With r (a caller without a root of its own), ".." under /proc
// goes up from what the caller's /proc path names (procDir).
func (e *Engine) walkIn(r *Request, root, start, p string, follow bool) (string, unix.Errno) {
	done := start
	if strings.HasPrefix(p, "/") {
		done = root
	}
	rest := strings.Split(p, "/")
	rt, lexical := e.route(done)
	var buf []byte
	unsure := false // done's last name is no link, but maybe no directory
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if unsure {
				// Linux looks ".." up in that directory: it must be one,
				// searchable.
				if _, le := readLinkIn(e.bindOf(done), done+"/.", buf); le != unix.EINVAL {
					return "", cmp.Or(le, unix.ENOTDIR)
				}
				unsure = false
			}
			if r != nil && e.Opt.Policy != nil && e.Opt.Policy.paths {
				if class, _ := e.Opt.Policy.P.Classify(done); class == policy.Hidden {
					return "", unix.ENOENT // a hidden directory is not there to leave
				}
			}
			if r != nil && rt == "/proc" && done != "/proc" {
				d, en := e.procDir(r, done)
				if en != 0 {
					return "", en
				}
				if links++; links > maxLinks {
					return "", unix.ELOOP
				}
				if _, routed := e.route(d); !routed {
					// A link of /proc led into the image or a bind (a
					// cwd, an fd's directory): walk to it, then go up.
					done, rest = root, append(append(strings.Split(d, "/"), ".."), rest...)
					rt, lexical = "", false
					continue
				}
				done = d
			}
			if done != root && done != "/" {
				done = path.Dir(done)
			}
			rt, lexical = e.route(done)
			continue
		}
		cand := path.Join(done, c)
		// The last name: "name/" and "name/." are last too, and
		// followed.
		last, slash := true, len(rest) > 0
		for _, x := range rest {
			if x != "" && x != "." {
				last = false
				break
			}
		}
		b := e.bindOf(cand)
		if !lexical && b == nil {
			rt, lexical = e.route(cand)
		}
		if lexical || (last && !follow && !slash) {
			done, unsure = cand, false
			continue
		}
		if buf == nil {
			buf = make([]byte, PathMax)
		}
		n, le := readLinkIn(b, cand, buf)
		switch {
		case le == unix.EINVAL: // not a link
			done, unsure = cand, true
			continue
		case le == unix.ENOENT && last:
			done, unsure = cand, false // a name to create
			continue
		case le != 0:
			return "", le
		}
		if links++; links > maxLinks {
			return "", unix.ELOOP
		}
		unsure = false // done is a directory: a link was read in it
		target := string(buf[:n])
		if strings.HasPrefix(target, "/") {
			done = root
			rt, lexical = e.route(done)
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	if len(done) >= PathMax {
		return "", unix.ENAMETOOLONG
	}
	return done, 0
}

// readLinkIn reads the symlink at image path p, or at p in bind b:
// EINVAL when p is not a link, as readlink(2).
func readLinkIn(b *guestpath.Bind, p string, buf []byte) (int, unix.Errno) {
	if b == nil {
		n, le := lklPath(lkl.SysReadlinkat, 1, p, [6]uintptr{atFdcwd, 0, uptr(buf), uintptr(len(buf))})
		runtime.KeepAlive(buf)
		return int(n), le
	}
	var n int
	err := guestpath.At(b.Target(p), true, func(fd int, name string, empty int) error {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, empty|unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			return unix.EINVAL
		}
		var err error
		n, err = unix.Readlinkat(fd, name, buf)
		return err
	})
	if err != nil {
		if en, ok := err.(unix.Errno); ok {
			return 0, en
		}
		return 0, unix.EIO
	}
	return n, 0
}

// sysChroot serves chroot(2): a per-process root inside the image or a bind.
func sysChroot(e *Engine, r *Request) Result {
	// The directory is looked up (links followed) and searchable by the
	// caller's credentials, then CAP_SYS_CHROOT is needed, in Linux's order.
	// The new root is an image directory or one of a bind; /proc and the
	// system routes are refused (EPERM).
	t, en := e.target(r, unix.AT_FDCWD, r.Args[0])
	if en == 0 {
		t, en = e.followDev(r, t)
	}
	if en == 0 && !t.Host {
		if root := r.P.chroot(); root != "" {
			t.Path, en = e.followIn(root, t.Path)
		} else if real, ok := lklRealpath(t.Path); ok {
			t.Path = real
		}
		if en == 0 {
			t, en = e.classify(r, t.Path)
		}
	}
	if en != 0 {
		return errno(en, LKL)
	}
	if t.Proc != nil || (t.Host && t.Bind == nil) {
		return errno(unix.EPERM, Denied)
	}
	if res, good := enterableDir(r, t); !good {
		return res
	}
	if c := r.P.creds(); !c.Has(capSysChroot) {
		return errno(unix.EPERM, Denied)
	}
	r.P.setRoot(t.Path)
	return ok(0, Emulated)
}

// followRooted resolves the final symlink of image target t inside the
// root of a chrooted caller, for the calls that always follow it.
func (e *Engine) followRooted(r *Request, t guestpath.Target) (guestpath.Target, unix.Errno) {
	root := r.P.chroot()
	if root == "" || t.Host {
		return t, 0
	}
	p, en := e.followIn(root, t.Path)
	if en != 0 || p == t.Path {
		return t, en
	}
	nt, en := e.classify(r, p)
	if en == 0 && !nt.Host {
		nt.Tail = t.Tail
	}
	return nt, en
}

// interpIn is the image path of a program's interpreter (PT_INTERP or a
// #! line), interp as the program names it, for the caller's root (r nil:
// the image's).
func (e *Engine) interpIn(r *Request, interp string) string {
	p := guestpath.Clean("/", interp)
	if r == nil {
		return p
	}
	if root := r.P.chroot(); root != "" {
		if q, en := e.walkIn(nil, root, root, p, true); en == 0 {
			return q
		}
		return root + p // not found there: the load reports it
	}
	return p
}

// linkRule says whether a call follows a symlink in the final component
// of its (first) path: always, or as one of its arguments says.
type linkRule struct {
	follows bool   // the call follows links (by default)
	arg     int8   // the argument that says otherwise
	mask    uint64 // the bits of arg that say so, 0 for none
	invert  bool   // the bits ask to follow (AT_SYMLINK_FOLLOW)
}

// linkRules are the calls that follow a final symlink, by number; calls
// that never follow it (lstat, readlink, unlink, mkdir, rename...) have no
// rule. A chrooted process's lookups read it, and a call's second run with
// its links walked (redoWalked). (Filled by init: the
// table's handlers resolve paths, which read it.)
var linkRules [MaxNr]linkRule

func init() {
	always := linkRule{follows: true}
	byFlag := func(arg int8, mask uint64) linkRule { return linkRule{follows: true, arg: arg, mask: mask} }
	rules := map[string]linkRule{
		"stat": always, "stat64": always, "access": always, "chmod": always, "fchmodat": always,
		"chown": always, "truncate": always, "utime": always, "utimes": always, "futimesat": always,
		"getxattr": always, "setxattr": always, "listxattr": always, "removexattr": always,
		"statfs": always, "creat": always, "execve": always, "chdir": always, "chroot": always,
		"open":              byFlag(1, unix.O_NOFOLLOW),
		"openat":            byFlag(2, unix.O_NOFOLLOW),
		"openat2":           always,
		"newfstatat":        byFlag(3, unix.AT_SYMLINK_NOFOLLOW),
		"fstatat64":         byFlag(3, unix.AT_SYMLINK_NOFOLLOW),
		"statx":             byFlag(2, unix.AT_SYMLINK_NOFOLLOW),
		"faccessat":         always,
		"faccessat2":        byFlag(3, unix.AT_SYMLINK_NOFOLLOW),
		"fchmodat2":         byFlag(3, unix.AT_SYMLINK_NOFOLLOW),
		"fchownat":          byFlag(4, unix.AT_SYMLINK_NOFOLLOW),
		"utimensat":         byFlag(3, unix.AT_SYMLINK_NOFOLLOW),
		"execveat":          byFlag(4, unix.AT_SYMLINK_NOFOLLOW),
		"inotify_add_watch": byFlag(2, unix.IN_DONT_FOLLOW),
		"linkat":            {arg: 4, mask: unix.AT_SYMLINK_FOLLOW, invert: true},
		"name_to_handle_at": {arg: 4, mask: unix.AT_SYMLINK_FOLLOW, invert: true},
	}
	Syscalls(func(nr int, s *Syscall) {
		if rule, ok := rules[s.Name]; ok {
			linkRules[nr] = rule
		}
	})
}

// followsLink reports whether request r follows a symlink in the final
// component of its first path.
func followsLink(r *Request) bool {
	if r.Nr < 0 || r.Nr >= MaxNr {
		return false
	}
	rule := linkRules[r.Nr]
	if rule.mask == 0 {
		return rule.follows
	}
	set := r.Args[rule.arg]&rule.mask != 0
	if rule.invert {
		return set
	}
	if !set && rule.mask == unix.O_NOFOLLOW {
		// open(O_CREAT|O_EXCL) does not follow a final link: EEXIST.
		fl := r.Args[rule.arg]
		return fl&(unix.O_CREAT|unix.O_EXCL) != unix.O_CREAT|unix.O_EXCL
	}
	return !set
}
