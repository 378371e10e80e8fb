package procfs

import (
	"runtime"
	"strconv"

	"github.com/kbox-project/kbox/lkl"
	"github.com/kbox-project/kbox/shadowfd"
	"github.com/kbox-project/kbox/sysabi"
	"golang.org/x/sys/unix"
)

// The LKL side of serving a node: LKL's own proc (LKL nodes, Config's
// KernelProc) and the LKL files fds are (FdRef.LKLFd, reached through
// LKL's /proc/self/fd).

// pathMax is Linux's PATH_MAX.
const pathMax = 4096

// OpenLKL opens LKL node n (with the rest of the guest's path, tail) for
// the guest's flags: LKL's fd, close-on-exec (the guest's O_CLOEXEC is
// its virtual fd's).
func OpenLKL(cfg Config, n *Node, tail string, flags int) (int, unix.Errno) {
	lflags := int(lkl.OpenFlagsToLKL(uint32(flags&^(unix.O_CLOEXEC|unix.O_CREAT)))) | unix.O_CLOEXEC
	fd, le := kprocCall(cfg, lkl.SysOpenat, n.LKL+tail, [6]uintptr{0, 0, uintptr(lflags)})
	return int(fd), le
}

// Stat stats node n at guest path p (links not followed: the engine
// follows them first): an LKL node is LKL's, an Obj what its fd is (a
// shadow's through shadows), the others StatNode's.
func Stat(s System, shadows *shadowfd.Manager, p string, n *Node, nofollow bool, st *unix.Stat_t) unix.Errno {
	switch n.Kind {
	case LKL:
		flags := uintptr(0)
		if nofollow {
			flags = unix.AT_SYMLINK_NOFOLLOW
		}
		var lst lkl.Stat64
		_, le := kprocCall(s.Config(), lkl.SysNewfstatat, n.LKL, [6]uintptr{0, 0, lkl.PtrOf(&lst), flags})
		runtime.KeepAlive(&lst)
		if le != 0 {
			return le
		}
		lst.ToHost(st)
		return 0
	case Obj:
		return StatFd(n.Fd, shadows, st)
	}
	return StatNode(s, p, n, st)
}

// Access decides access(2) of node n (links followed before) for mode:
// LKL's answer for its files (a write of an LKL node also needs
// n.Write and the caller's CAP_SYS_ADMIN, admin), the host's for a host
// object, the node's rules else.
func Access(cfg Config, n *Node, mode int, may MayWrite, admin func() bool) unix.Errno {
	switch n.Kind {
	case LKL:
		_, le := kprocCall(cfg, lkl.SysFaccessat2, n.LKL, [6]uintptr{0, 0, uintptr(mode), unix.AT_EACCESS})
		if le == 0 && mode&unix.W_OK != 0 && (!n.Write || !admin()) {
			return unix.EACCES
		}
		return le
	case Obj:
		switch ref := n.Fd; {
		case ref.LKLFd >= 0:
			_, le := kprocCall(cfg, lkl.SysFaccessat2, "self/fd/"+strconv.Itoa(ref.LKLFd), [6]uintptr{0, 0, uintptr(mode), unix.AT_EACCESS})
			return le
		case ref.Host == "":
			return 0
		}
		return sysabi.Errno(unix.Access(n.Fd.Host, uint32(mode)))
	case Dir:
		if mode&unix.W_OK != 0 {
			return unix.EACCES
		}
		return 0
	case Text:
		if n.Store != nil && n.Owner != nil && mode&unix.X_OK == 0 {
			if mode&unix.W_OK != 0 && !MayStore(n, may) {
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

// Statfs is statfs of node n (links followed before): the filesystem of
// the file an Obj is, else /proc's.
func Statfs(n *Node, sf *unix.Statfs_t) unix.Errno {
	if ref := n.Fd; n.Kind == Obj && ref.LKLFd >= 0 {
		_, le := lkl.Syscall6(lkl.SysFstatfs, uintptr(ref.LKLFd), lkl.PtrOf(sf), 0, 0, 0, 0)
		return le
	} else if n.Kind == Obj && ref.Host != "" {
		return sysabi.Errno(unix.Statfs(ref.Host, sf))
	}
	return sysabi.Errno(unix.Statfs("/proc", sf))
}

// LKLFdPath returns LKL's link of its fd lklfd (the file's path in the
// image as LKL knows it now), or fallback.
func LKLFdPath(cfg Config, lklfd int, fallback string) string {
	if lklfd < 0 || !cfg.HasKernelProc {
		return fallback
	}
	// One buffer holds the link read (its first pathMax bytes) and,
	// after them, the name of LKL's link, NUL-terminated.
	name := "self/fd/" + strconv.Itoa(lklfd)
	buf := make([]byte, pathMax+len(name)+1)
	copy(buf[pathMax:], name)
	n, le := lkl.Syscall6(lkl.SysReadlinkat, uintptr(cfg.KernelProc), lkl.Ptr(buf[pathMax:]), lkl.Ptr(buf), pathMax, 0, 0)
	runtime.KeepAlive(buf)
	if le != 0 || n == 0 {
		return fallback
	}
	return string(buf[:n])
}
