// Package gdbmirror keeps a copy of the engine's Go state in plain C memory
// for GDB (scripts/gdb/kbox-gdb.py), and gives GDB fixed C functions to
// break on: kbox_gdb_dispatch before every dispatched syscall,
// kbox_gdb_dispatched after it.
//
// GDB cannot read Go maps, interfaces or goroutine-owned state reliably
// through Go's DWARF, so when the debug flag is on (KBOX_GDB=1 at start,
// or kbox_gdb_enabled set from GDB) the engine rewrites the mirror after
// each syscall that may change it: the processes, their virtual fds, the
// shadow nodes, the last path resolutions, and on request a snapshot of
// the kernel's own /proc. The layout is mirror.h; its version is
// KBOX_GDB_VERSION. With the flag off the engine's only cost is one load
// and branch per syscall (On).
//
// Without LKL (no cgo) the package does nothing and On is false.
package gdbmirror

// Kinds of a virtual fd (enum kbox_gdb_kind).
const (
	KindLKL     = 1
	KindHost    = 2
	KindListing = 3
)

// Kinds of a resolved path (enum kbox_gdb_route).
const (
	RouteImage = 1
	RouteHost  = 2
	RouteBind  = 3
	RouteProc  = 4
	RouteDevFd = 5
)

// Proc is one guest process and its virtual fds.
type Proc struct {
	Pid      int
	Cwd, Exe string
	Fds      []Fd
}

// Fd is one virtual fd.
type Fd struct {
	Fd, Kind, LKLFd, HostFd, Flags int
	Cloexec                        bool
	Path                           string
}

// Shadow is one shadow node: the host content file of an image inode.
type Shadow struct {
	HostDev, HostIno uint64
	LKLFd            int
	Path             string
}

// Resolved is one path resolution: how the engine placed a guest path.
type Resolved struct {
	Pid, Nr, Route int
	ReadOnly       bool
	// Given is the path as the guest gave it, Abs cleaned and absolute;
	// Host is the host directory a host target is confined beneath, Rel
	// its path there.
	Given, Abs, Host, Rel string
}
