package guestpath

import (
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// CPURoute is the host's CPU topology, shown read-only in the guest's /sys
// (so that nproc, lscpu and sysconf(_SC_NPROCESSORS_CONF) see the host's
// CPUs); the rest of the guest's /sys is LKL's.
const CPURoute = "/sys/devices/system/cpu"

// RouteOf returns the host route among routes holding clean guest path p,
// if any.
func RouteOf(routes []string, p string) (string, bool) {
	for _, r := range routes {
		if Under(p, r) {
			return r, true
		}
	}
	return "", false
}

// Under reports whether path p is dir or below it (dir/...), without
// making dir+"/" (the check runs for every path a guest names).
func Under(p, dir string) bool {
	return p == dir || len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// RouteTarget is the Target of clean guest path abs on host route rt.
func RouteTarget(rt, abs string) Target {
	rel := strings.TrimPrefix(strings.TrimPrefix(abs, rt), "/")
	if rel == "" {
		rel = "."
	}
	return Target{Host: true, Path: abs, Route: rt, Rel: rel}
}

// OpenHost opens a host-route target confined beneath its route: no .., no
// symlink or magic link may leave it.
func OpenHost(t Target, flags int, mode uint32) (int, error) {
	if t.Bind != nil {
		return t.Bind.Open(t.Rel, flags, mode)
	}
	root, err := RouteRoot(t.Route)
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

// At runs fn(dirfd, name, empty) for the *at() calls that have no
// openat2 form (stat, access, readlink). On a system route dirfd is the
// route root and name t.Rel, already checked lexically, /proc's escape
// paths refused by classify. In a bind, where symlinks may point anywhere,
// dirfd is a confined O_PATH fd of the target itself (of the link when
// nofollow), name is "" and empty is AT_EMPTY_PATH.
func At(t Target, nofollow bool, fn func(dirfd int, name string, empty int) error) error {
	if t.Bind != nil {
		return bindAt(t, nofollow, fn)
	}
	root, err := RouteRoot(t.Route)
	if err != nil {
		return err
	}
	return fn(root, t.Rel, 0)
}

// routeRoots holds an O_PATH fd of each host route's root, opened once
// (kbox's own, close-on-exec): every host-route call is resolved beneath
// it.
var routeRoots sync.Map // route -> int

// RouteRoot returns the O_PATH fd of a system host route's root.
func RouteRoot(route string) (int, error) {
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

// RoRoute refuses a guest open that could change a file of a read-only
// host route (the host's CPU topology: a root guest of a root kbox must
// not take the host's CPUs offline).
func RoRoute(t Target, flags int) unix.Errno {
	if t.Bind != nil || t.Route != CPURoute {
		return 0
	}
	if flags&unix.O_ACCMODE != unix.O_RDONLY || flags&(unix.O_CREAT|unix.O_TRUNC) != 0 {
		return unix.EACCES
	}
	return 0
}

// ProcFd names fd through kbox's own /proc, which reaches exactly the
// inode behind fd: operations with no fd or AT_EMPTY_PATH form (chmod,
// utimensat, link with AT_SYMLINK_FOLLOW) use it on a confined O_PATH fd.
func ProcFd(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
