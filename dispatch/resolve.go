package dispatch

import (
	"os"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/kbox-project/kbox/gdbmirror"
	"github.com/kbox-project/kbox/procfs"
	"golang.org/x/sys/unix"
)

// Target is a resolved path: in the image (LKL) or on a host route.
type Target struct {
	Host bool
	// Path is the normalized absolute guest path.
	Path string
	// Route and Rel locate a host target: the route prefix and the path
	// beneath it.
	Route, Rel string
	// Bind is the bind holding a host target, nil on a system route.
	Bind *Bind
	// Proc is a /proc path that kbox answers itself (package procfs,
	// procnode.go). Host is
	// set and Route empty, so that a handler that does not serve nodes
	// reaches nothing.
	Proc *procfs.Node
	// Tail is "/" or "/." when the guest's path ended so: Path is clean,
	// LKLPath puts it back, so that LKL judges it as Linux does ("file/"
	// is ENOTDIR, open("new/", O_CREAT) EISDIR, mkdir("a/b/") works). A
	// host target has it at the end of Rel instead.
	Tail string
	// Fd, when above 0, says that Path is /dev/fd/N (N = Fd-1), or
	// /dev/stdin, stdout or stderr (N = 0, 1, 2), with kbox's /dev: the
	// caller's own fd N when the link is followed (devfd.go). FdDir says
	// Path is /dev/fd, the link to /proc/self/fd.
	Fd    int
	FdDir bool
}

// LKLPath is the path to give LKL: Path with the guest's trailing slash.
func (t *Target) LKLPath() string {
	if t.Tail == "" {
		return t.Path
	}
	return t.Path + t.Tail
}

// dirTail returns the trailing "/" or "/." of a guest path, if any.
func dirTail(p string) string {
	switch {
	case strings.HasSuffix(p, "/"):
		return "/"
	case strings.HasSuffix(p, "/."):
		return "/."
	}
	return ""
}

// Clean normalizes a guest path lexically: absolute, no . or .., no double
// slashes; .. at the root stays at the root, so no lexical path leaves the
// image. (Symlinks inside the image are resolved by LKL under its chroot.)
func Clean(cwd, p string) string {
	if isClean(p) {
		return p // the common case, without allocating
	}
	if !strings.HasPrefix(p, "/") {
		p = cwd + "/" + p
	}
	return path.Clean("/" + p)
}

// route returns the host route holding p, if any.
func (e *Engine) route(p string) (string, bool) {
	for _, r := range e.Opt.HostRoutes {
		if p == r || strings.HasPrefix(p, r+"/") {
			return r, true
		}
	}
	return "", false
}

// target reads the path argument at addr and resolves it against dirfd.
func (e *Engine) target(r *Request, dirfd int32, addr uint64) (Target, unix.Errno) {
	p, en := readPath(r, addr)
	if en != 0 {
		return Target{}, en
	}
	return e.resolveAt(r, dirfd, p)
}

// resolveAt resolves path (already read from the guest) against dirfd.
func (e *Engine) resolveAt(r *Request, dirfd int32, p string) (Target, unix.Errno) {
	if p == "" {
		return Target{}, unix.ENOENT
	}
	var abs string
	switch {
	case strings.HasPrefix(p, "/"):
		abs = Clean("/", p)
	case dirfd == unix.AT_FDCWD:
		abs = Clean(r.P.Cwd(), p)
	case r.P.FDs.IsVirtual(int(dirfd)) && !isHostFile(r, dirfd):
		ent, ok := r.P.FDs.Get(int(dirfd))
		if !ok {
			return Target{}, unix.EBADF
		}
		abs = Clean(ent.File.Path, p)
	default:
		// A host directory fd (or a host file kept in the virtual
		// table): only one opened on a host route or in a bind is
		// usable, and the result must stay on that route. Any other
		// host fd (a shadow of an image file, a pipe) is not a
		// directory: ENOTDIR, as on Linux.
		base, en := e.hostDirPath(r, int(dirfd))
		if en != 0 {
			return Target{}, en
		}
		abs = Clean(base, p)
		if _, ok := e.route(abs); !ok && e.bindOf(base) == nil && !e.inPts(base) {
			return Target{}, unix.EACCES
		}
	}
	t, en := e.classify(r, abs)
	if tail := dirTail(p); tail != "" && en == 0 {
		switch {
		case t.Proc != nil:
			t.Tail = tail
		case !t.Host && t.Path != "/":
			t.Tail = tail
		case t.Host && t.Rel != ".":
			t.Rel += tail // the host kernel judges it as well
		}
	}
	if gdbmirror.On() {
		e.gdbResolved(r, p, t, en) // the debug mirror (gdb.go)
	}
	return t, en
}

// classify resolves abs, a clean absolute guest path: a bind, a host
// route (/proc is kbox's own: procnode.go) or the image.
func (e *Engine) classify(r *Request, abs string) (Target, unix.Errno) {
	return e.classifyN(r, abs, 0)
}

// classifyN is classify after depth links followed under /proc, with the
// policy's path rules applied to the result (policy.go).
func (e *Engine) classifyN(r *Request, abs string, depth int) (Target, unix.Errno) {
	t, en := e.classifyRaw(r, abs, depth)
	if en == 0 && e.Opt.Policy != nil && e.Opt.Policy.paths {
		en = e.policyPath(r, &t)
	}
	return t, en
}

// classifyRaw is classifyN without the policy.
func (e *Engine) classifyRaw(r *Request, abs string, depth int) (Target, unix.Errno) {
	if b := e.bindOf(abs); b != nil {
		return bindTarget(b, abs), 0
	}
	if t, ok := e.netFileTarget(abs); ok {
		return t, 0 // kbox's resolv.conf and hosts with --net (netfiles.go)
	}
	if t, ok := e.devTarget(abs); ok {
		return t, 0 // kbox's devpts instance (dev.go)
	}
	if fd, rest, ok := e.devFd(abs); ok {
		return e.beneathFd(r, abs, fd, rest) // /dev/fd/N (devfd.go)
	}
	rt, ok := e.route(abs)
	if !ok {
		return Target{Path: abs}, 0
	}
	if rt == "/proc" {
		return e.classifyProc(r, abs, depth)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(abs, rt), "/")
	if rel == "" {
		rel = "."
	}
	return Target{Host: true, Path: abs, Route: rt, Rel: rel}, 0
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
		return e.hostLinkPath(procFd(hfd))
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
	if g, ok := e.bindGuestPath(l); ok {
		return g, 0
	}
	if g, ok := e.ptsGuestPath(link, l); ok {
		return g, 0
	}
	if _, ok := e.route(l); !ok {
		return "", unix.EACCES
	}
	return l, 0
}

// openHostAs is openHost for a guest's open: an O_PATH open takes the flags
// open(2) takes with it, and a create runs under the guest's umask
// (umask.go).
func (e *Engine) openHostAs(r *Request, t Target, flags int, mode uint32) (fd int, err error) {
	if flags&unix.O_PATH != 0 {
		// open(2) ignores the other flags (libcs add O_LARGEFILE);
		// openat2, which serves it, would refuse them with EINVAL.
		flags &= unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		return e.openHost(t, flags, mode)
	}
	withUmask(r.P.umask.Load(), func() { fd, err = e.openHost(t, flags, mode) })
	return fd, err
}

// openHost opens a host-route target confined beneath its route: no .., no
// symlink or magic link may leave it.
func (e *Engine) openHost(t Target, flags int, mode uint32) (int, error) {
	if t.Bind != nil {
		return t.Bind.open(t.Rel, flags, mode)
	}
	root, err := routeRoot(t.Route)
	if err != nil {
		return -1, err
	}
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flags&(unix.O_CREAT|unix.O_TMPFILE) == 0 {
		how.Mode = 0
	}
	return unix.Openat2(root, t.Rel, &how)
}

// atRoute runs fn(dirfd, name, empty) for the *at() calls that have no
// openat2 form (stat, access, readlink). On a system route dirfd is the
// route root and name t.Rel, already checked lexically, /proc's escape
// paths refused by classify. In a bind, where symlinks may point anywhere,
// dirfd is a confined O_PATH fd of the target itself (of the link when
// nofollow), name is "" and empty is AT_EMPTY_PATH.
func atRoute(t Target, nofollow bool, fn func(dirfd int, name string, empty int) error) error {
	if t.Bind != nil {
		return bindAt(t, nofollow, fn)
	}
	root, err := routeRoot(t.Route)
	if err != nil {
		return err
	}
	return fn(root, t.Rel, 0)
}

// routeRoots holds an O_PATH fd of each host route's root, opened once
// (kbox's own, close-on-exec): every host-route call is resolved beneath
// it.
var routeRoots sync.Map // route -> int

// routeRoot returns the O_PATH fd of a system host route's root.
func routeRoot(route string) (int, error) {
	if route == "" {
		return -1, unix.ENOENT // a /proc node (Target.Proc): nothing on the host
	}
	if fd, ok := routeRoots.Load(route); ok {
		return fd.(int), nil
	}
	fd, err := unix.Open(route, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if old, loaded := routeRoots.LoadOrStore(route, fd); loaded {
		unix.Close(fd)
		return old.(int), nil
	}
	return fd, nil
}
